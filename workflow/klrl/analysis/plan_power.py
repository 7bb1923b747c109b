"""Each claim's power as a study config plans it (`klrl power plan`): the claims its grid can
test, each at its declared size inside its family, at the config's seeds and at given seed SDs.

The paper's claims (klrl.analysis.claims) a grid tests are those whose every term's KL
configuration and policy mode it holds, with two β (two lags) where a term takes the axis' low
and high end, and whose domain it evaluates (an out-of-domain claim needs an out-of-domain task).
Their family is every such claim the config does not declare `not_testable`, and a claim's power
is that of its decision at Holm's first step, p below 5% / claims (which decides it whatever the
family's other p-values: a lower bound):
    rate   exact (klrl.analysis.power_study.rate_row_power), its configuration collapsing with
           probability `size` and the other never, one β stratum (a pooled claim's other strata
           only add to it);
    mean   by simulation of pass@1 grids (klrl.analysis.simulation) at the domain's base rate,
           problems and seed SD; a claim pooled over S rows as one row of S × seeds, a claim of
           four terms (growth along β) at its size over √2 (its contrast's variance is twice a
           pair's), a claim over every row (out of domain: each task at each β) as the product of
           its rows' powers.
The equivalence claims need a true difference of 0 to be planned (not here: they are reported
with no power). The mechanism claims (klrl.analysis.mechanism_claims) are planned by
klrl.analysis.mechanism_power's planted studies restricted to the grid's configurations and β, at
the sizes the config declares (`mechanism_sizes`) or their defaults.
A claim's seeds needed are the fewest that give 80% in the family of every claim the grid tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from klrl.analysis.claim_family import ALPHA, NOT_IN_GRID
from klrl.analysis.claims import CLAIMS, Claim
from klrl.analysis.mechanism_claims import SIZES, MechanismSizes, mechanism_claims
from klrl.analysis.power_study import _differences, fewest_seeds, rate_row_power
from klrl.analysis.simulation import Scenario

TARGET = 0.8
MOST_SEEDS = 128  # seeds needed beyond this: "> 128"
MECHANISM_SEEDS = range(2, 31)  # the seed counts a mechanism claim is planned at


@dataclass(frozen=True)
class Domain:
    base_rate: float  # the base model's pass@1
    problems: int  # problems a row is evaluated on (out of domain: the smallest task's)
    tasks: int  # evaluation tasks, one row each
    seed_sd: float  # seed SD of pass@1


@dataclass(frozen=True)
class Planning:
    """What a plan is computed from: the domains' pass@1 and seed SDs, the mechanism's seed SD."""

    domains: dict[str, Domain]  # in | out (none where the grid evaluates in domain only)
    mechanism_sd: dict[str, float]  # kl_reverse, objective
    mechanism_sizes: MechanismSizes = SIZES  # the sizes the config declares for the mechanism claims
    samples: int = 4
    grids: int = 400
    random_seed: int = 0


def _axis_values(cells: list[dict], kl: str, policy: str, axis: str) -> set:
    return {c[axis] for c in cells if c["kl"] == kl and c["policy"] == policy}


def holds_terms(claim: Claim, cells: list[dict]) -> bool:
    """Whether the grid holds the claim's every term, with two values of any axis it steps along."""
    for term in claim.terms:
        if term.kl == "base" or not _axis_values(cells, term.kl, term.policy, "seed"):
            return False
        for axis, how in (("beta", term.beta), ("lag", term.lag)):
            if how != "each" and len(_axis_values(cells, term.kl, term.policy, axis)) < 2:
                return False
    return True


def _strata(claim: Claim, cells: list[dict]) -> int:
    """The claim's rows: β values (or β steps) common to its terms."""
    kls = [t for t in claim.terms if t.kl != "none"]
    if not kls:
        return 1
    common = set.intersection(*(_axis_values(cells, t.kl, t.policy, "beta") for t in kls))
    stepping = any(t.beta != "each" for t in claim.terms)
    return max(1, len(common) - 1) if stepping else max(1, len(common))


def claim_seeds(claim: Claim, cells: list[dict]) -> int:
    """The fewest seeds any of the claim's configurations has."""
    return min(len(_axis_values(cells, t.kl, t.policy, "seed")) for t in claim.terms)


def claim_power(claim: Claim, cells: list[dict], seeds: int, family: int, planning: Planning) -> float | None:
    """The claim's power at its declared size with `seeds` per configuration in a family of
    `family` claims (None: an equivalence claim, not planned here)."""
    level = ALPHA / family
    if claim.test == "rate":
        return rate_row_power((abs(claim.size), 0.0), seeds, family, ALPHA)
    if claim.direction == "equivalent":
        return None
    domain = planning.domains[claim.domain]
    strata = _strata(claim, cells)
    pooled = claim.combine == "pooled"
    effect = abs(claim.size) / (np.sqrt(2) if len(claim.terms) == 4 else 1.0)
    scenario = Scenario(
        base_rate=domain.base_rate,
        seed_sd=domain.seed_sd,
        problems=domain.problems,
        samples=planning.samples,
        seeds=seeds * strata if pooled else seeds,
    )
    hits = [
        tested.interval(1 - 2 * level)[0] > 0
        for tested in _differences(scenario, effect, 8, planning.grids, planning.random_seed)
    ]
    rows = 1 if pooled else strata * domain.tasks
    return float(np.mean(hits)) ** rows


def seeds_needed(claim: Claim, cells: list[dict], family: int, planning: Planning) -> int | None:
    """The fewest seeds giving TARGET power (None: more than MOST_SEEDS, or not planned)."""

    def enough(n: int) -> bool:
        power = claim_power(claim, cells, n, family, planning)
        return power is not None and power >= TARGET

    return fewest_seeds(enough, MOST_SEEDS)


def paper_plan(cells: list[dict], not_testable: dict, planning: Planning) -> list[dict]:
    """Per paper claim the grid tests: its power at the grid's seeds in its family, the seeds it
    needs for TARGET, and whether the config declares it not testable."""
    claims = [claim for claim in CLAIMS if holds_terms(claim, cells) and claim.domain in planning.domains]
    family = sum(claim.name not in not_testable for claim in claims)  # a declared claim: as if it joined
    rows = []
    for claim in claims:
        declared = claim.name in not_testable
        rows.append(
            {
                "claim": claim.name,
                "test": claim.test if claim.direction != "equivalent" else "equivalence",
                "size": claim.size or claim.margin,
                "seeds": claim_seeds(claim, cells),
                "power": claim_power(claim, cells, claim_seeds(claim, cells), family + declared, planning),
                "seeds_needed": seeds_needed(claim, cells, len(claims), planning),
                "not_testable": declared,
            }
        )
    return rows


def mechanism_plan(cells: list[dict], seeds: list[int], planning: Planning, studies: int = 200) -> dict:
    """Per mechanism claim the grid tests, its power at each seed count (planted studies at the
    grid's on-policy configurations and β, every claim in the family: a lower bound where the
    config declares some not testable)."""
    from klrl.analysis.mechanism_power import Shape, at_declared_sizes, verdict_shares, verdicts_per_study

    on = [c for c in cells if c["policy"] == "on"]
    kls = {c["kl"] for c in on}
    betas = sorted({c["beta"] for c in on if c["kl"] != "none"})
    powers: dict[str, dict[int, float]] = {}
    for n in seeds:
        planned = at_declared_sizes(betas, planning.mechanism_sd, n, sizes=planning.mechanism_sizes)
        kept = {key: means for key, means in planned.means.items() if key[0] in kls}
        shape = Shape(kept, n, planned.seed_sd, planned.sizes)
        shares = verdict_shares(verdicts_per_study(shape, studies, planning.random_seed))
        for claim, tally in shares.items():
            if set(tally) != {NOT_IN_GRID}:  # a claim with a row in some study
                powers.setdefault(claim, {})[n] = tally.get("reproduced", 0.0)
    return powers


def plan_table(config: dict, planning: Planning, command: str, studies: int = 200) -> str:
    """The plan's block (Markdown): each claim the grid tests, its power at the config's seeds,
    the seeds it needs and what the config declares; the planning inputs in its head."""
    from klrl.analysis.preregistration import grid_cells

    cells = grid_cells(config)
    declared = config.get("not_testable", {})
    inside, outside = planning.domains["in"], planning.domains.get("out")
    out_of_domain = (
        f"{outside.seed_sd:g} out of domain ({outside.tasks} tasks of {outside.problems} problems)"
        if outside
        else "no out-of-domain task"
    )
    lines = [
        f"Generated by `{command}`: each claim's power at its declared size inside its family (Holm's first step,"
        f" 5% family-wise; {planning.grids} simulated grids a mean claim, {studies} planted studies a mechanism"
        f" claim, random seed {planning.random_seed}), from: pass@1 {inside.base_rate:g} without effect, seed SD"
        f" {inside.seed_sd:g} in domain ({inside.problems} problems) and {out_of_domain},"
        f" {planning.samples} samples a problem; mechanism"
        f" seed SD {planning.mechanism_sd['kl_reverse']:g} nats (KL) and {planning.mechanism_sd['objective']:g}"
        " (J_β).",
        "",
        "| claim | test | size | seeds | power | seeds for 80% | declared not testable |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in paper_plan(cells, declared, planning):
        power = "—" if row["power"] is None else f"{row['power']:.2f}"
        needed = row["seeds_needed"] or f"> {MOST_SEEDS}"
        lines.append(
            f"| {row['claim']} | {row['test']} | {row['size']:g} | {row['seeds']} | {power} | {needed}"
            f" | {declared.get(row['claim'], 'no')} |"
        )
    sizes = {claim.name: claim.side.size for claim in mechanism_claims(planning.mechanism_sizes)}
    on_seeds = len({c["seed"] for c in cells if c["policy"] == "on"})
    counts = sorted({*MECHANISM_SEEDS, on_seeds})
    for claim, powers in mechanism_plan(cells, counts, planning, studies).items():
        needed = next((n for n in counts if powers[n] >= TARGET), f"> {counts[-1]}")
        lines.append(
            f"| {claim} | mechanism | {sizes[claim]:g} | {on_seeds} | {powers[on_seeds]:.2f} | {needed}"
            f" | {declared.get(claim, 'no')} |"
        )
    return "\n".join(lines)
