"""Mechanism claims: what each configuration does to the KL it states, tested on the KL it attains.

Beyond the paper. Each cell's final policy is measured at evaluation (klrl.evaluation.mechanism:
the sequence-level KL(π‖πref) on held-out prompts, with exact per-prefix sums, and the stated
objective J_β = E[reward] − β·KL(π‖πref)). The describe table (klrl.objective.gradient_claims)
names the gradient each configuration follows; these claims say what that gradient predicts for
the attained KL, and are decided as one family of claims (klrl.analysis.claim_family), each at
the size it means:
    lowers        the configuration whose gradient is that of a reverse KL (the sequence's, or
                  the per-token one of the "both" placements) or a per-token forward KL holds
                  KL(π‖πref) below what no KL attains, at every β (size: 0.5 nats lower)
    does not      the configuration whose gradient is zero in expectation (K1 in the loss) or
    lower         not that of a KL to πref (K3 in the reward) holds it no lower than no KL at
                  any β (reproduced: not 0.5 nats lower; its size: not lower at all)
    falls with β  lowered more as β grows (pooled over the β steps; size 0.25 nats per step)
    objective     at equal β, the unbiased K1 in the reward attains a higher J_β than a biased
                  configuration (pooled over β; size 0.1), reported whichever way it comes out
The claims were added after a 2-seed run of the default grid showed the pattern (docs/statistics.md
says so): no KL ended near a reverse KL of 1.0-1.1, K1 in the reward at 0.45-0.53 at β 1, K1 in the
loss and K3 in the reward above no KL. Their sizes are readings, not numbers from the paper, which
measures no attained KL: "lowers" is to at most half of no KL's ~1 nat (0.5 nats). They were first
declared at 0.2 nats (0.1 per β step, 0.05 of J_β) and raised to these after the mechanism pilot,
before the study's first cell: at the pilot's seed SD no claim reached 80% power at 0.2 nats within
the study's budget.
A study's config may declare sizes of its own (`mechanism_sizes`, klrl.analysis.preregistration records
them in its plan before its first cell) where its model attains KLs of another scale.
Per-seed values are compared by Welch's t (klrl.analysis.claim_family.welch); a row per β (or β
step) is descriptive, with its 95% interval; the claim's verdict is the family's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from klrl.analysis.claim_family import ALPHA, DECISION_COLUMNS, Side, decide_claims, welch
from klrl.analysis.claims import Term
from klrl.analysis.verdicts import describe, row_keys
from klrl.objective.gradient_claims import describe as gradient_of
from klrl.objective.kl_config import KLConfig

MEASURES = ("kl_reverse", "objective")


@dataclass(frozen=True)
class MechanismSizes:
    """What the claims mean, in the measures' units: a config may declare its own (its
    `mechanism_sizes`, recorded in its plan) where its model attains KLs of another scale."""

    lower: float = 0.5  # nats: what "lowers the KL" means
    per_step: float = 0.25  # nats per β step: what "more as β grows" means
    objective_gap: float = 0.1  # J_β: what "attains a higher objective" means (reward units)
    reading: str = "to at most half of no KL's attained KL on the tiny model"  # why `lower` is that size


SIZES = MechanismSizes()  # the sizes read on the tiny model (the module docstring says how)


@dataclass(frozen=True)
class MechanismClaim:
    name: str
    statement: str
    terms: tuple[Term, ...]
    measure: str  # kl_reverse | objective
    side: Side
    combine: str  # every | pooled
    size_source: str

    def predicted_by(self) -> str:
        """The on-policy gradients of the claim's KL configurations, from the describe table."""
        names = dict.fromkeys(t.kl for t in self.terms if t.kl != "none")
        return "; ".join(f"{name}: {gradient_of(KLConfig.from_name(name, beta=1.0))['on'].target}" for name in names)


def _versus_none(kl: str) -> tuple[Term, Term]:
    return Term(1, kl), Term(-1, "none")


def _lowers(kl: str, what: str, sizes: MechanismSizes) -> MechanismClaim:
    return MechanismClaim(
        f"kl-{kl}-lowers",
        f"{what} holds KL(π‖πref) below no KL's at every β",
        _versus_none(kl),
        "kl_reverse",
        Side("less", 0.0, -sizes.lower),
        "every",
        f"a reading: lower by {sizes.lower:g} nats, {sizes.reading}",
    )


def _does_not_lower(kl: str, what: str, sizes: MechanismSizes) -> MechanismClaim:
    return MechanismClaim(
        f"kl-{kl}-does-not-lower",
        f"{what} does not hold KL(π‖πref) below no KL's at any β",
        _versus_none(kl),
        "kl_reverse",
        Side("greater", -sizes.lower, 0.0),
        "every",
        f"a reading: not lower by {sizes.lower:g} nats (reproduced); meant as not lower at all (its size)",
    )


def _falls_with_beta(kl: str, what: str, sizes: MechanismSizes) -> MechanismClaim:
    return MechanismClaim(
        f"kl-{kl}-falls-with-beta",
        f"{what} holds KL(π‖πref) lower as β grows",
        (Term(1, kl, beta="high"), Term(-1, kl, beta="low")),
        "kl_reverse",
        Side("less", 0.0, -sizes.per_step),
        "pooled",
        f"a reading: {sizes.per_step:g} nats lower per step of the β grid",
    )


def _objective(biased: str, what: str, sizes: MechanismSizes) -> MechanismClaim:
    return MechanismClaim(
        f"objective-k1-reward-above-{biased}",
        f"K1 in the reward attains a higher J_β = E[reward] − β·KL(π‖πref) than {what}, at equal β",
        (Term(1, "k1-reward"), Term(-1, biased)),
        "objective",
        Side("greater", 0.0, sizes.objective_gap),
        "pooled",
        f"a reading: {sizes.objective_gap:g} higher (pass@1-scale reward units)",
    )


def mechanism_claims(sizes: MechanismSizes = SIZES) -> tuple[MechanismClaim, ...]:
    """The claims at `sizes`, in the order the tables list them."""
    return (
        _lowers("k1-reward", "K1 in the reward", sizes),
        _lowers("k3-loss", "K3 in the loss", sizes),
        _lowers("k1-both", "K1 in both", sizes),
        _lowers("k3-both", "K3 in both", sizes),
        _does_not_lower("k1-loss", "K1 in the loss", sizes),
        _does_not_lower("k3-reward", "K3 in the reward", sizes),
        _falls_with_beta("k1-reward", "K1 in the reward", sizes),
        _falls_with_beta("k3-loss", "K3 in the loss", sizes),
        _objective("k1-loss", "K1 in the loss", sizes),
        _objective("k3-reward", "K3 in the reward", sizes),
        _objective("k3-loss", "K3 in the loss", sizes),
    )


MECHANISM_CLAIMS = mechanism_claims()


def sizes_of(declared: dict | None) -> MechanismSizes:
    """The sizes a config's (or a recorded plan's) `mechanism_sizes` declares; the tiny model's
    without one."""
    return MechanismSizes(**declared) if declared else SIZES


ROW_COLUMNS = ("claim", "model", "beta", "seeds", "effect", "ci_lo", "ci_hi", "kind")
CLAIM_COLUMNS = (
    "claim",
    "statement",
    "predicted_by",
    "model",
    "measure",
    "combine",
    "null",
    "size",
    "size_source",
    *DECISION_COLUMNS,
)


def seed_values(results) -> dict[tuple, dict[str, np.ndarray]]:
    """Per (model, configuration (kl, β, policy, lag)) each measure's values over its seeds, in
    seed order, from every on-policy cell that has a measurement."""
    found: dict[tuple, dict[int, dict]] = {}
    for cell, tags in results.cells.items():
        measured = results.mechanism(cell)
        if measured is None or tags["policy"] != "on":
            continue
        key = (tags["kl"], 0.0 if tags["kl"] == "none" else tags["beta"], "on", 0)
        found.setdefault((tags["model"], key), {})[tags["seed"]] = measured
    return {
        where: {m: np.array([seeds[s][m] for s in sorted(seeds)], dtype=float) for m in MEASURES}
        for where, seeds in found.items()
    }


def mechanism_tables(
    results, not_testable: dict | None = None, sizes: MechanismSizes = SIZES
) -> tuple[list[dict], list[dict]]:
    """(descriptive rows, one per claim × model × β or β step; the claims at `sizes`, decided as
    one family; those the plan declared `not_testable` (claim → seeds it would need) reported so)."""
    not_testable = not_testable or {}
    values = seed_values(results)
    models = sorted({model for model, _ in values})
    rows, tested = [], []
    for claim in mechanism_claims(sizes):
        for model in models or [""]:  # no measured cell: each claim "not in this grid"
            configs = [key for m, key in values if m == model]
            contrasts = []
            for beta, _, keys in row_keys(claim, configs):
                if not all((model, key) in values for key in keys):
                    continue
                terms = [(t.weight, values[(model, key)][claim.measure]) for t, key in zip(claim.terms, keys)]
                row = welch(terms)
                low, high = row.interval(0.95)
                seeds = "/".join(str(len(v)) for _, v in terms)
                rows.append(dict(zip(ROW_COLUMNS, (claim.name, model, describe(beta), seeds, row.effect, low, high))))
                rows[-1]["kind"] = "descriptive"
                contrasts.append(row)
            tested.append((claim, model, contrasts))
    decisions = decide_claims(
        [(claim.side, claim.combine, contrasts) for claim, _, contrasts in tested],
        [not_testable.get(claim.name) for claim, _, _ in tested],
    )
    claims = [
        {
            "claim": claim.name,
            "statement": claim.statement,
            "predicted_by": claim.predicted_by(),
            "model": model,
            "measure": claim.measure,
            "combine": claim.combine,
            "null": claim.side.null,
            "size": claim.side.size,
            "size_source": claim.size_source,
        }
        | decision
        for (claim, model, _), decision in zip(tested, decisions)
    ]
    return rows, claims


FAMILY_RULE = (
    f"one test per claim at its declared size, its rows combined as the claim says (every β: all rows; pooled: "
    f"one fixed-effect estimate), the claims' hypotheses corrected together by Holm's step-down method with "
    f"Shaffer's restriction at {ALPHA:.0%} family-wise (klrl.analysis.claim_family)"
)
