"""`klrl plan`: the run's analysis plan, fixed and hashed before the first cell trains.

A plan holds what the analysis will do with the cells: every claim (klrl.analysis.claims: its
terms, comparison, test, direction, margin, domain, how its rows combine and its declared size
with its source), every mechanism claim
(klrl.analysis.mechanism_claims: its terms, measure, side, declared size and its source, how its
rows combine), the rows it will test (per claim, model,
β and lag: the configuration of each term), the family (its correction and level, the
minimum of survivors, how a claim's verdict follows from its test), the floor, the collapse
rule, the power the "≈" rows are sized for, and the seeds of every configuration. Its hash is the
first 12 hex digits of the SHA-256 of its canonical JSON. The workflow's rule `plan` writes it to
results/<experiment>/plan.json before any train job starts (every train job takes it as input)
and appends a line to plans.jsonl: the hash, the plan itself, the time, and how many cells had
finished training then (0: fixed before any result). A plan that changes after results (a claim,
the correction, the seeds) is a new plan, appended below the earlier ones, which stay.
`verify` recomputes a recorded hash from the plan stored beside it (`klrl plan --verify`), at any
later commit: what the plan was is read from the record, not rebuilt from the code.

`analysis_record` (klrl aggregate) builds the plan of the cells it analyses with the code of
that moment, and says whether it is the plan the workflow recorded last, and whether that one
was fixed before any cell finished.
"""

from __future__ import annotations

import hashlib
import json


from pathlib import Path

from klrl.analysis.claims import CLAIMS
from klrl.analysis.claim_family import ALPHA
from klrl.analysis.family import CLAIM_RULE, CORRECTION, POWER
from klrl.analysis.mechanism_claims import (
    FAMILY_RULE as MECHANISM_FAMILY_RULE,
    MECHANISM_CLAIMS,
    mechanism_claims,
    sizes_of,
)
from klrl.analysis.outcomes import COLLAPSE_FRACTION
from klrl.analysis.verdicts import FLOOR, MIN_SURVIVORS, describe, row_keys
from klrl.core.paths import Layout
from klrl.core.provenance import utc_now


def _configuration(key: tuple) -> str:
    kl, beta, policy, lag = key
    return f"{kl}/beta{float(beta):g}/{policy}/lag{int(lag)}"


def planned_rows(cells: list[dict]) -> list[dict]:
    """Per claim and model, every row the claims table will test on these cells: its β, lag and
    each term's configuration (klrl.analysis.verdicts.row_keys; "base" for the base model)."""
    configs: dict[str, set] = {}
    for tags in cells:
        key = (tags["kl"], float(tags["beta"]), tags["policy"], int(tags["lag"]))
        configs.setdefault(tags["model"], set()).add(key)
    rows = []
    for claim in CLAIMS:
        for model, keys in sorted(configs.items()):
            for beta, lag, terms in row_keys(claim, keys):
                if all(term is None or term in keys for term in terms):
                    rows.append(
                        {
                            "claim": claim.name,
                            "model": model,
                            "beta": describe(beta),
                            "lag": describe(lag),
                            "terms": ["base" if term is None else _configuration(term) for term in terms],
                        }
                    )
    return rows


def plan_of(cells: list[dict], not_testable: dict | None = None, mechanism_sizes: dict | None = None) -> dict:
    """The plan for cells given by their tags (model, kl, beta, policy, lag, seed); `not_testable`:
    the claims the study declares not testable at this scale, each with the seeds per
    configuration it would need (the config's `not_testable`); `mechanism_sizes`: the sizes the
    config declares for the mechanism claims (recorded as given; without them the plan has no such
    key and the claims their default sizes)."""
    not_testable = dict(sorted((not_testable or {}).items()))
    known = {c.name for c in CLAIMS} | {c.name for c in MECHANISM_CLAIMS}
    unknown = sorted(set(not_testable) - known)
    if unknown:
        raise ValueError(f"not_testable: no claim named {', '.join(unknown)} (klrl.analysis.claims, mechanism_claims)")
    configurations: dict[str, list[int]] = {}
    for tags in cells:
        key = f"{tags['model']}/" + _configuration((tags["kl"], tags["beta"], tags["policy"], tags["lag"]))
        configurations.setdefault(key, []).append(int(tags["seed"]))
    claims = [
        {
            "name": c.name,
            "paper": c.paper,
            "terms": [
                {"weight": t.weight, "kl": t.kl, "policy": t.policy, "beta": t.beta, "lag": t.lag} for t in c.terms
            ],
            "comparison": c.comparison(),
            "test": c.test,
            "direction": c.direction,
            "margin": c.margin,
            "domain": c.domain,
            "combine": c.combine,
            "size": c.side.size,
            "size_source": c.size_source,
        }
        for c in CLAIMS
    ]
    mechanism = [
        {
            "name": c.name,
            "statement": c.statement,
            "terms": [{"weight": t.weight, "kl": t.kl, "beta": t.beta} for t in c.terms],
            "measure": c.measure,
            "direction": c.side.direction,
            "null": c.side.null,
            "size": c.side.size,
            "size_source": c.size_source,
            "combine": c.combine,
        }
        for c in mechanism_claims(sizes_of(mechanism_sizes))
    ]
    declared_sizes = {"mechanism_sizes": dict(sorted(mechanism_sizes.items()))} if mechanism_sizes else {}
    return declared_sizes | {
        "claims": claims,
        "mechanism_claims": mechanism,
        "not_testable": not_testable,
        "rows": planned_rows(cells),
        "family": {
            "correction": CORRECTION,
            "alpha": ALPHA,
            "rate rows": "the conditional exact test of equal collapse rates (stratified when pooled), Clopper-Pearson "
            "bounds against a size",
            "mean rows": "seeds that did not collapse; a configuration with collapsed seeds by its survivors' own "
            f"variance (Welch, Hsu's degrees of freedom), with at least {MIN_SURVIVORS} survivors",
            "claims": CLAIM_RULE,
            "mechanism claims": MECHANISM_FAMILY_RULE,
        },
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
    plan = plan_of(grid_cells(config), config.get("not_testable"), config.get("mechanism_sizes"))
    digest = plan_hash(plan)
    layout.plan().parent.mkdir(parents=True, exist_ok=True)
    layout.plan().write_text(json.dumps({"hash": digest, "plan": plan}, indent=2) + "\n")
    history = recorded_plans(layout)
    if history and history[-1]["hash"] == digest:
        return digest, False
    finished = sum(1 for _ in layout.cells().glob("*/train/status.json"))
    with layout.plans().open("a") as file:
        record = {"hash": digest, "written": utc_now(), "cells_finished": finished, "plan": plan}
        file.write(json.dumps(record, sort_keys=True) + "\n")
    return digest, True


def verify(source: str) -> list[str]:
    """Each recorded plan of `source` checked against the plan stored with it: a plans.jsonl
    (every line, or `FILE:LINE` for one) or a plan.json (the workflow's; or the analysis'
    tables/plan.json, published with the run, which also holds every plan the workflow recorded:
    the plan a block of docs/results.md names). One line per record saying it verifies; ValueError naming the
    first record whose stored plan does not hash to its recorded hash, or that stores none."""
    path, _, line = source.rpartition(":") if source.rpartition(":")[2].isdigit() else (source, "", "")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such plans file (a plans.jsonl or a plan.json)")
    if path.suffix == ".jsonl":
        lines = path.read_text().splitlines()
        numbers = [int(line)] if line else [n for n, text in enumerate(lines, 1) if text.strip()]
        if any(not 1 <= n <= len(lines) for n in numbers):
            raise ValueError(f"{path}: no line {line} (it has {len(lines)})")
        records = [(f"{path}:{n}", json.loads(lines[n - 1])) for n in numbers]
    else:
        record = json.loads(path.read_text())
        records = [(str(path), record)]  # an analysis' plan.json also holds the plans recorded before it
        records += [(f"{path} (recorded plan {n})", entry) for n, entry in enumerate(record.get("recorded", []), 1)]
    checked = []
    for where, record in records:
        if "plan" not in record:
            raise ValueError(f"{where}: plan {record.get('hash')} stores no plan to recompute its hash from")
        digest = plan_hash(record["plan"])
        if digest != record["hash"]:
            raise ValueError(f"{where}: the stored plan hashes to {digest}, not the recorded {record['hash']}")
        checked.append(f"{where}: plan {digest} verifies ({len(record['plan']['rows'])} rows)")
    return checked


def declared_not_testable(history: list[dict]) -> dict:
    """The claims the last recorded plan declared not testable at this scale (claim → seeds)."""
    return history[-1]["plan"].get("not_testable", {}) if history else {}


def declared_sizes(history: list[dict]) -> dict | None:
    """The mechanism claims' sizes the last recorded plan declared (None: the default sizes)."""
    return history[-1]["plan"].get("mechanism_sizes") if history else None


def analysis_record(cells: list[dict], layout: Layout) -> dict:
    """The plan of the analysed cells, its hash, the recorded plans, and whether the analysis
    followed the last recorded plan (same hash) and whether that plan preceded every result."""
    history = recorded_plans(layout)
    plan = plan_of(cells, declared_not_testable(history), declared_sizes(history))
    digest = plan_hash(plan)
    followed = bool(history) and history[-1]["hash"] == digest
    return {
        "hash": digest,
        "followed": followed,
        "fixed_before_results": followed and history[-1]["cells_finished"] == 0,
        "recorded": history,
        "plan": plan,
    }
