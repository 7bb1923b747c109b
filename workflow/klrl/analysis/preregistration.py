"""`klrl plan`: the run's analysis plan, fixed and hashed before the first cell trains.

A plan holds what the analysis will do with the cells: every claim (klrl.analysis.claims: its comparison,
test, direction, margin and domain), the family correction and its level, the floor, the
collapse rule, the power the "≈" rows are sized for, and the seeds of every configuration. Its
hash is the first 12 hex digits of the SHA-256 of its canonical JSON. The workflow's rule `plan`
writes it to results/<experiment>/plan.json before any train job starts (every train job takes
it as input) and appends a line to plans.jsonl: the hash, the time, and how many cells had
finished training then (0: fixed before any result). A plan that changes after results (a claim,
the correction, the seeds) is a new plan, appended below the earlier ones, which stay.

`analysis_record` (klrl aggregate) builds the plan of the cells it analyses with the code of
that moment, and says whether it is the plan the workflow recorded last, and whether that one
was fixed before any cell finished.
"""

from __future__ import annotations

import hashlib
import json


from klrl.analysis.claims import CLAIMS
from klrl.analysis.family import ALPHA, CORRECTION, POWER
from klrl.analysis.outcomes import COLLAPSE_FRACTION
from klrl.core.paths import Layout
from klrl.core.provenance import utc_now
from klrl.analysis.verdicts import FLOOR


def plan_of(cells: list[dict]) -> dict:
    """The plan for cells given by their tags (model, kl, beta, policy, lag, seed)."""
    configurations: dict[str, list[int]] = {}
    for tags in cells:
        key = f"{tags['model']}/{tags['kl']}/beta{float(tags['beta']):g}/{tags['policy']}/lag{int(tags['lag'])}"
        configurations.setdefault(key, []).append(int(tags["seed"]))
    claims = [
        {
            "name": c.name,
            "comparison": c.comparison(),
            "test": c.test,
            "direction": c.direction,
            "margin": c.margin,
            "domain": c.domain,
        }
        for c in CLAIMS
    ]
    return {
        "claims": claims,
        "correction": {"method": CORRECTION, "alpha": ALPHA},
        "floor": FLOOR,
        "collapse": f"diverged, or in-domain pass@1 below {COLLAPSE_FRACTION:g} × the base's",
        "equivalence_power": POWER,
        "seeds": {key: sorted(seeds) for key, seeds in sorted(configurations.items())},
    }


def plan_hash(plan: dict) -> str:
    return hashlib.sha256(json.dumps(plan, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


def grid_cells(config: dict) -> list[dict]:
    """The tags of every cell a workflow config expands to (klrl.grid.expansion)."""
    from klrl.grid.expansion import expand_grid

    return [
        {"model": c.model, "kl": c.kl, "beta": c.beta, "policy": c.policy, "lag": c.train["async_lag"], "seed": c.seed}
        for c in expand_grid(config).values()
    ]


def recorded_plans(layout: Layout) -> list[dict]:
    path = layout.plans()
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def record_plan(config: dict, layout: Layout | None = None) -> tuple[str, bool]:
    """Writes the config's plan to plan.json and, when its hash is not the last recorded one,
    appends it to plans.jsonl with the count of cells finished so far. Returns (hash, new).
    `layout`: where the run's files are (default: the config's, results/<experiment>)."""
    layout = layout or Layout.of(config)
    plan = plan_of(grid_cells(config))
    digest = plan_hash(plan)
    layout.plan().parent.mkdir(parents=True, exist_ok=True)
    layout.plan().write_text(json.dumps({"hash": digest, "plan": plan}, indent=2) + "\n")
    history = recorded_plans(layout)
    if history and history[-1]["hash"] == digest:
        return digest, False
    finished = sum(1 for _ in layout.cells().glob("*/train/status.json"))
    with layout.plans().open("a") as file:
        file.write(json.dumps({"hash": digest, "written": utc_now(), "cells_finished": finished}) + "\n")
    return digest, True


def analysis_record(cells: list[dict], layout: Layout) -> dict:
    """The plan of the analysed cells, its hash, the recorded plans, and whether the analysis
    followed the last recorded plan (same hash) and whether that plan preceded every result."""
    plan = plan_of(cells)
    digest = plan_hash(plan)
    history = recorded_plans(layout)
    followed = bool(history) and history[-1]["hash"] == digest
    return {
        "hash": digest,
        "followed": followed,
        "fixed_before_results": followed and history[-1]["cells_finished"] == 0,
        "recorded": history,
        "plan": plan,
    }
