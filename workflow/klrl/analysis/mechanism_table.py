"""tables/mechanism.csv: the KL each trained cell attains, one row per cell whose evaluation
measured it (results.json's "mechanism", klrl.evaluation.mechanism), with the cell's tags; a cell
without a measurement (missing, or diverged to non-finite weights) has no row."""

from __future__ import annotations

from klrl.evaluation.results_files import MECHANISM_KEYS

MEASURED = tuple(key for key in MECHANISM_KEYS if key != "beta")  # the cell's β is one of its tags


def mechanism_cell_rows(results) -> list[dict]:
    """One row per measured cell of `results` (klrl.analysis.tables.Results): its id, tags
    (klrl.analysis.tables.cell_tags) and the measurement's
    keys but β, which is the cell's (`klrl evaluate --beta`)."""
    rows = []
    for cell, tags in results.cells.items():
        measured = results.mechanism(cell)
        if measured:
            rows.append({"cell": cell, **tags, **{key: measured[key] for key in MEASURED}})
    return rows
