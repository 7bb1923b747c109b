"""`klrl readme-results`: the README's results, generated from a run's tables.

Blocks belong to one experiment (results/<experiment>/), so the README can hold several runs.
Rewrites the block between `<!-- claims:EXPERIMENT:begin -->` and `<!-- claims:EXPERIMENT:end -->`
with one line per row of `claims.csv` (klrl.verdicts): the paper's claim, the verdict computed
from the data, the comparison, its effect, interval, raw and Holm-adjusted p-values, the seeds
behind it and the reason of an `at floor` row, headed by the config and run time the table came
from, every commit its cells trained at with the count of cells and their dates
(provenance.csv), and the plan's hash and whether the analysis followed it (plan.json). Every block
`<!-- table:EXPERIMENT:NAME:begin -->` … `<!-- table:EXPERIMENT:NAME:end -->` gets the run's
`NAME.md` table (main, table1, ...) under the same heading. Nothing outside that experiment's
blocks changes; no number or verdict is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

from klrl.family import ALPHA, CORRECTION, POWER, REACHABLE_SEEDS
from klrl.provenance import UNRECORDED, source_commit

TABLE_BLOCK = r"<!-- table:{experiment}:([\w-]+):begin -->"


def _number(value: float, digits: str = ".3f") -> str:
    return "n/a" if pd.isna(value) else format(value, digits)


def _where(row: pd.Series) -> str:
    where = [f"{row['task']} ({row['domain']} domain)"]
    where += [f"β {row['beta']}"] if isinstance(row["beta"], str) and row["beta"] else []
    where += [f"lag {row['lag']}"] if isinstance(row["lag"], str) and row["lag"] else []
    return ", ".join(where)


def claim_line(row: pd.Series) -> str:
    """One README line for one row of the claims table."""
    if row["verdict"] == "not in this grid":
        return f"- {row['paper']}: **not in this grid** (needs {row['comparison']})."
    head = f"- {row['paper']}: **{row['verdict']}**, {row['comparison']} on {_where(row)}: "
    if row["verdict"] == "at floor":
        return head + f"{row['reason']}; seeds {row['seeds']}."
    p = f"p {_number(row['p'], '.3g')} (Holm {_number(row['p_adjusted'], '.3g')})"
    if row["test"] == "exact":
        return head + f"{row['reason']} (difference {_number(row['effect'], '+.3f')}), exact {p}."
    level = f"{row['ci_level']:.0%}" if not pd.isna(row["ci_level"]) else ""
    line = (
        head
        + f"effect {_number(row['effect'], '+.3f')}, {level} interval [{_number(row['ci_lo'])}, {_number(row['ci_hi'])}], "
        f"{p}, seeds {row['seeds']}"
    )
    if not pd.isna(row["seeds_for_power"]):
        needed = int(row["seeds_for_power"])
        reach = (
            f": beyond reach (more than the {REACHABLE_SEEDS} seeds `klrl power` sizes for)"
            if needed > REACHABLE_SEEDS
            else ""
        )
        line += f"; {POWER:.0%} power for ≈ needs about {needed} seeds per configuration{reach}"
    reason = row["reason"] if isinstance(row["reason"], str) and row["reason"] else ""
    return line + (f" ({reason})." if reason else ".")


def run_provenance(tables: Path, commit: str | None) -> str:
    """The dates and commits of a run's cells (provenance.csv) and its plan (plan.json), in words."""
    path = tables / "provenance.csv"
    rows = pd.read_csv(path, dtype=str).fillna("") if path.is_file() else pd.DataFrame()
    if len(rows) and set(rows["commit"]) != {UNRECORDED}:

        def dates(row) -> str:
            return (
                row["first_finished"]
                if row["first_finished"] == row["last_finished"]
                else f"{row['first_finished']} to {row['last_finished']}"
            )

        cells = "; ".join(f"{row['cells']} at `{row['commit']}` ({dates(row)})" for _, row in rows.iterrows())
        text = f"Cells trained: {cells}."
    else:
        text = f"Cells trained at commit `{commit or source_commit()}` (the cells record no commit of their own)."
    path = tables / "plan.json"
    if not path.is_file():
        return text + " No analysis plan recorded (the tables predate `klrl plan`)."
    record = json.loads(path.read_text())
    recorded = record["recorded"]
    if not recorded:
        return text + f" No plan was recorded before this run; its analysis plan hashes to `{record['hash']}`."
    last = recorded[-1]
    when = (
        "before any cell finished"
        if last["cells_finished"] == 0
        else f"after {last['cells_finished']} cells had finished"
    )
    earlier = [
        f"`{plan['hash']}` ({plan['written'][:10]}, {plan['cells_finished']} cells finished)" for plan in recorded[:-1]
    ]
    text += f" Plan `{last['hash']}` (`klrl plan`), recorded {last['written'][:10]} {when}"
    text += f"; earlier plans: {', '.join(earlier)}" if earlier else ""
    if record["followed"]:
        return text + ": the analysis followed it."
    return text + f": the analysis did not follow it (the analysed cells and code give plan `{record['hash']}`)."


def provenance(table: str, config: str, run_time: str, run: str) -> str:
    """The line that heads a generated block: which command, table, config, run time, cells' commits and plan."""
    return f"Generated by `python -m klrl readme-results` from `{table}` of the run of `{config}` (run time {run_time}). {run}"


def claims_block(experiment: str, claims: pd.DataFrame, config: str, run_time: str, run: str) -> str:
    claims = claims.astype({"beta": str, "lag": str}).replace({"beta": {"nan": ""}, "lag": {"nan": ""}})
    family = int(claims["p_adjusted"].notna().sum())
    header = provenance("claims.csv", config, run_time, run) + (
        f" Tests: `klrl.claims`, `klrl.family`; interval: `klrl.contrasts`. The family: the {family} rows with a p-value, "
        f"{CORRECTION}-corrected at {ALPHA:.0%} family-wise; p is two-sided (for ≈: TOST inside the margin, the test against "
        "the nearer margin outside it), shown raw and adjusted; intervals are not adjusted. Mean rows compare the seeds that "
        "did not collapse; `at floor` rows are not decided and not in the family."
    )
    counts = claims["verdict"].value_counts()
    summary = ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
    begin, end = f"<!-- claims:{experiment}:begin -->", f"<!-- claims:{experiment}:end -->"
    lines = [begin, header, "", f"Rows: {summary}.", ""] + [claim_line(row) for _, row in claims.iterrows()] + [end]
    return "\n".join(lines)


def table_block(experiment: str, name: str, table: str, header: str) -> str:
    """A `table:EXPERIMENT:NAME` block holding a run's Markdown table under its provenance line."""
    marker = f"table:{experiment}:{name}"
    return "\n".join([f"<!-- {marker}:begin -->", header, "", table.rstrip("\n"), f"<!-- {marker}:end -->"])


def rewrite(readme: str, block: str) -> str:
    """`readme` with the block of the same markers as `block` (its first and last lines) replaced;
    ValueError if the README lacks them or has them out of order."""
    begin, end_marker = block.splitlines()[0], block.splitlines()[-1]
    start, end = readme.find(begin), readme.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"README: no {begin} … {end_marker} block to rewrite")
    return readme[:start] + block + readme[end + len(end_marker) :]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tables", type=Path, required=True, help="folder with claims.csv (results/<experiment>/tables)"
    )
    parser.add_argument(
        "--experiment", required=True, help="whose README blocks to rewrite (claims:EXPERIMENT, table:EXPERIMENT:NAME)"
    )
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    parser.add_argument("--config", required=True, help="the config the run used, e.g. config/study.yaml")
    parser.add_argument("--run-time", required=True, help="the run's wall time, e.g. '2 h 41 min on 2 cores'")
    parser.add_argument(
        "--commit", help="the commit the run used, for tables whose cells record none (default: git rev-parse HEAD)"
    )


def run(args: argparse.Namespace) -> None:
    path = args.tables / "claims.csv"
    if not path.is_file():
        raise SystemExit(f"{path}: no claims table (run `klrl aggregate` first)")
    run_line = run_provenance(args.tables, args.commit)
    text = args.readme.read_text()
    experiment = args.experiment
    blocks = [claims_block(experiment, pd.read_csv(path), args.config, args.run_time, run_line)]
    for name in re.findall(TABLE_BLOCK.format(experiment=re.escape(experiment)), text):
        table = args.tables / f"{name}.md"
        if not table.is_file():
            raise SystemExit(f"{table}: the README has a table:{experiment}:{name} block but the run has no such table")
        blocks.append(
            table_block(
                experiment, name, table.read_text(), provenance(f"{name}.md", args.config, args.run_time, run_line)
            )
        )
    try:
        for block in blocks:
            text = rewrite(text, block)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    args.readme.write_text(text)
    print(f"{args.readme}: claims block and {len(blocks) - 1} table block(s) rewritten from {args.tables}")
