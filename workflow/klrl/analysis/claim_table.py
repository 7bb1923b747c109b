"""The paper's claims decided as one family: each claim's rows (klrl.analysis.verdicts) combined
into its one test at its declared size (klrl.analysis.claim_family), one row of the claims table
per claim and model.

A row that cannot be tested (`at floor`, `too few survivors`) counts against an `every` claim (it
cannot be shown at every β or lag: it takes p 1 for presence and for the size) and is left out of
a pooled one; the reason names it either way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from klrl.analysis.claim_family import DECISION_COLUMNS, NOT_IN_GRID, decide_claims
from klrl.analysis.claims import CLAIMS, Claim
from klrl.analysis.mechanism_claims import (
    CLAIM_COLUMNS as MECHANISM_CLAIM_COLUMNS,
    ROW_COLUMNS as MECHANISM_ROW_COLUMNS,
    mechanism_tables,
    sizes_of,
)
from klrl.analysis.verdicts import COLUMNS as ROW_COLUMNS, claim_rows

COLUMNS = (
    "claim",
    "paper",
    "comparison",
    "model",
    "domain",
    "test",
    "combine",
    "size",
    "size_source",
    *DECISION_COLUMNS,
)


class Untested:
    """A row no test could be run on: it shows nothing, either way."""

    effect = np.nan

    def p_above(self, threshold: float) -> float:
        return 1.0

    def p_below(self, threshold: float) -> float:
        return 1.0

    def interval(self, level: float) -> tuple[float, float]:
        return np.nan, np.nan


def claim_table(rows: list[dict], claims: tuple[Claim, ...] = CLAIMS, not_testable: dict | None = None) -> list[dict]:
    """One entry per claim and model of `rows` (the claims table's rows, each with its "_test"
    where it has one), decided together; a claim with no row in the grid is `not in this grid`,
    one the plan declared `not_testable` (claim → seeds it would need) is reported so."""
    not_testable = not_testable or {}
    entries, heads, notes, counts = [], [], [], []
    for claim in claims:
        own = [row for row in rows if row["claim"] == claim.name and row.get("verdict") != NOT_IN_GRID]
        models = list(dict.fromkeys(row["model"] for row in own)) or [""]
        for model in models:
            mine = [row for row in own if row["model"] == model]
            untested = [row for row in mine if "_test" not in row]
            if claim.combine == "every":
                tests = [row.get("_test", Untested()) for row in mine]
            else:  # no stratum that could be tested: the claim shows nothing
                tests = [row["_test"] for row in mine if "_test" in row] or [Untested() for _ in mine[:1]]
            entries.append((claim.side, claim.combine, tests))
            counts.append(len(mine))
            notes.append("; ".join(f"{_where(row)} {row['verdict']}: {row['reason']}" for row in untested))
            heads.append(
                {
                    "claim": claim.name,
                    "paper": claim.paper,
                    "comparison": claim.comparison(),
                    "model": model,
                    "domain": claim.domain,
                    "test": claim.test,
                    "combine": claim.combine,
                    "size": claim.side.size,
                    "size_source": claim.size_source,
                }
            )
    table = []
    needed = [not_testable.get(head["claim"]) for head in heads]
    for head, decision, note, count in zip(heads, decide_claims(entries, needed), notes, counts):
        reason = "; ".join(part for part in (decision.get("reason", ""), note) if part)
        table.append(dict.fromkeys(COLUMNS, np.nan) | head | decision | {"reason": reason, "rows": count})
    return table


def _where(row: dict) -> str:
    parts = [row["task"]]
    if row.get("beta"):
        parts.append(f"β {row['beta']}")
    if row.get("lag"):
        parts.append(f"lag {row['lag']}")
    return ", ".join(parts)


def claim_frames(
    results, not_testable: dict | None = None, mechanism_sizes: dict | None = None
) -> dict[str, pd.DataFrame]:
    """A run's claims tables: the paper's claims and their descriptive rows, the mechanism claims
    and theirs; `not_testable`: the claims its plan declared so, with the seeds each would need;
    `mechanism_sizes`: the mechanism claims' sizes it declared (None: their defaults)."""
    rows = claim_rows(results)
    mechanism_rows, mechanism_claims = mechanism_tables(results, not_testable, sizes_of(mechanism_sizes))
    return {
        "claims": pd.DataFrame(claim_table(rows, not_testable=not_testable), columns=COLUMNS),
        "claim_rows": pd.DataFrame(
            [{key: value for key, value in row.items() if key != "_test"} for row in rows], columns=ROW_COLUMNS
        ),
        "mechanism_claims": pd.DataFrame(mechanism_claims, columns=MECHANISM_CLAIM_COLUMNS),
        "mechanism_rows": pd.DataFrame(mechanism_rows, columns=MECHANISM_ROW_COLUMNS),
    }
