"""The biased KL settings of a grid, stated when it loads: what each one's gradient estimates instead.

Every KL configuration's name promises the gradient of the sequence-level reverse KL
β·KL(πθ ‖ πref). For each configuration of a grid in each policy mode (off-policy with its lag),
the claim of the registry (`klrl.objective.gradient_claims`, from `klrl.objective.estimators`) says whether its expected
gradient is that one; each one that is not is listed once, on one line, with the gradient it
does estimate, and a setting whose KL term has zero expected gradient says that it does nothing.
The Snakefile prints these lines when it loads a config (`klrl.grid.expansion.expand_grid`'s cells), and
`klrl describe --config FILE` prints the same. The claims hold for sum-over-tokens aggregation
with no clamp acting; a line says so when the cells aggregate otherwise or clamp the KL.
Plain Python, no torch: it runs when Snakemake builds the DAG.
"""

from __future__ import annotations

from klrl.objective.gradient_claims import describe
from klrl.objective.estimators import OTHER, ZERO
from klrl.objective.kl_config import KLConfig


def _setting_of(cell) -> tuple[str, str, int]:
    return cell.kl, cell.policy, cell.train.get("async_lag", 0) if cell.policy == "off" else 0


def _caveats(cells) -> str:
    """What the registry's claims do not cover in these cells: token-mean aggregation, clamps."""
    notes = []
    if any(cell.train.get("loss_aggregation", "seq-sum") != "seq-sum" for cell in cells):
        notes.append("token-mean aggregation")
    clamps = sorted(
        {
            key
            for cell in cells
            for key in ("log_ratio_clamp", "value_clamp")
            if cell.train.get("kl", {}).get(key) is not None
        }
    )
    notes += [f"{key} set" for key in clamps]
    return (
        f" [the claim is for seq-sum aggregation and no clamp acting; these cells: {', '.join(notes)}]" if notes else ""
    )


def biased_lines(cells: dict) -> list[str]:
    """One line per KL configuration × policy mode × lag of `cells` whose expected gradient is not the
    sequence-level reverse KL's, in the grid's order."""
    members: dict[tuple, list] = {}
    for cell in cells.values():
        members.setdefault(_setting_of(cell), []).append(cell)
    lines = []
    for (kl, policy, lag), setting_cells in members.items():
        if kl == "none":
            continue
        claim = describe(KLConfig.from_name(kl, beta=1.0))[policy]
        if claim.unbiased:
            continue
        mode = "on-policy" if policy == "on" else f"off-policy, lag {lag}"
        if claim.target == ZERO:
            verdict = "does nothing, its KL term's expected gradient is zero"
        elif claim.target == OTHER:
            verdict = "biased, the gradient of no named divergence"
        else:
            verdict = f"biased, estimates the {claim.target} gradient"
        count = len(setting_cells)
        lines.append(
            f"{kl} ({mode}; {count} cell{'s' * (count != 1)}): {verdict}: {claim.gradient}{_caveats(setting_cells)}"
        )
    return lines


def report(cells: dict) -> str:
    """The lines under a heading, or one line saying that every setting is unbiased."""
    lines = biased_lines(cells)
    if not lines:
        return "KL settings: every one of this grid's is unbiased for the sequence-level reverse KL (klrl describe)\n"
    heading = f"KL settings biased for the sequence-level reverse KL their names state ({len(lines)}; klrl describe):"
    return "\n".join([heading] + [f"  {line}" for line in lines]) + "\n"
