"""`klrl readme-results`: the results blocks of docs/results.md, generated from a run's tables.

Blocks belong to one experiment (results/<experiment>/), so one page can hold several runs.
Rewrites the block between `<!-- claims:EXPERIMENT:begin -->` and `<!-- claims:EXPERIMENT:end -->`
with each claim's verdict in the run's family of claims (claims.csv, klrl.analysis.claim_table, its
rule stated in the block), then one line per descriptive row of the claims (claim_rows.csv,
klrl.analysis.verdicts): the comparison, its effect, interval, raw p, the seeds behind it and the
reason of an `at floor` row, headed by the config and run time the table came
from, every commit its cells trained at with the count of cells and their dates
(provenance.csv), and the plan's hash and whether the analysis followed it (plan.json). Every block
`<!-- table:EXPERIMENT:NAME:begin -->` … `<!-- table:EXPERIMENT:NAME:end -->` gets the run's
`NAME.md` table (main, table1, ...) under the same heading; a `mechanism:EXPERIMENT` block gets
the mechanism claims' verdicts (mechanism_claims.csv, klrl.analysis.mechanism_claims). Nothing outside that experiment's
blocks changes; no number or verdict is typed by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from klrl.analysis.claim_family import ALPHA, NOT_IN_GRID, NOT_TESTABLE
from klrl.analysis.family import CLAIM_RULE, CORRECTION, POWER, REACHABLE_SEEDS
from klrl.analysis.mechanism_claims import FAMILY_RULE
from klrl.analysis.verdicts import MIN_SURVIVORS
from klrl.core.provenance import UNRECORDED, source_commit

TABLE_BLOCK = r"<!-- table:{experiment}:([\w-]+):begin -->"


def _number(value: float, digits: str = ".3f") -> str:
    return "n/a" if pd.isna(value) else format(value, digits)


def _where(row: pd.Series) -> str:
    where = [f"{row['task']} ({row['domain']} domain)"]
    where += [f"β {row['beta']}"] if isinstance(row["beta"], str) and row["beta"] else []
    where += [f"lag {row['lag']}"] if isinstance(row["lag"], str) and row["lag"] else []
    return ", ".join(where)


def claim_line(row: pd.Series) -> str:
    """One line for one descriptive row of a claim (claim_rows.csv)."""
    head = f"- {row['paper']}: {row['comparison']} on {_where(row)}: "
    if row["verdict"] in ("at floor", "too few survivors"):
        return head + f"**{row['verdict']}**, {row['reason']}; seeds {row['seeds']}."
    level = f"{row['ci_level']:.0%}" if not pd.isna(row["ci_level"]) else ""
    what = "difference of collapse rates" if row["test"] == "exact" else "effect"
    line = (
        head + f"{what} {_number(row['effect'], '+.3f')}, {level} interval [{_number(row['ci_lo'])}, "
        f"{_number(row['ci_hi'])}], raw p {_number(row['p'], '.3g')}, seeds {row['seeds']}"
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


def decision_words(row: pd.Series) -> str:
    """A decided claim's estimate, adjusted p-values and declared size, in words."""
    reason = f"; {row['reason']}" if isinstance(row["reason"], str) and row["reason"] else ""
    return (
        f"estimate {_number(row['effect'], '+.3f')}, p of presence {_number(row['p_present_adjusted'], '.3g')}, "
        f"p of its size {_number(row['p_size_adjusted'], '.3g')} (adjusted); size {row['size']:g}: "
        f"{row['size_source']}{reason}"
    )


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


def claims_block(
    experiment: str, claims: pd.DataFrame, rows: pd.DataFrame, config: str, run_time: str, run: str
) -> str:
    """The `claims:EXPERIMENT` block: each claim's verdict in the run's family of claims
    (claims.csv), then its rows as descriptive estimates (claim_rows.csv)."""
    rows = rows.astype({"beta": str, "lag": str}).replace({"beta": {"nan": ""}, "lag": {"nan": ""}})
    tested = int((~claims["verdict"].isin([NOT_IN_GRID, NOT_TESTABLE])).sum())
    declared = int((claims["verdict"] == NOT_TESTABLE).sum())
    outside = f" ({declared} more declared {NOT_TESTABLE}, outside it)" if declared else ""
    header = provenance("claims.csv", config, run_time, run) + (
        " Tests: `klrl.analysis.claims`, `klrl.analysis.claim_family`, `klrl.analysis.claim_table`; rows: "
        "`klrl.analysis.verdicts`, `klrl.analysis.contrasts`, `klrl.analysis.rate_tests`. "
        f"The family: {_count(tested, 'claim')} tested{outside}, {CORRECTION}, {ALPHA:.0%} family-wise. Rows compare the seeds that "
        "did not collapse, a configuration with collapsed seeds by its survivors' own variance (Welch, Hsu's degrees "
        f"of freedom) and only with at least {MIN_SURVIVORS} survivors; a row's p is raw and one-sided, its interval "
        "unadjusted (90% for ≈)."
    )
    claim_lines = []
    for _, row in claims.iterrows():
        model = f" ({row['model']})" if isinstance(row["model"], str) and row["model"] else ""
        head = f"- {row['paper']}{model}: **{row['verdict']}**"
        if row["verdict"] == NOT_IN_GRID:
            claim_lines.append(head + f" (needs {row['comparison']}).")
        else:
            claim_lines.append(
                head + f" ({row['test']}, {row['combine']} over {_count(row['rows'], 'row')}: {decision_words(row)})."
            )
    return marked_block(
        f"claims:{experiment}",
        [
            header,
            "",
            f"Claims: {CLAIM_RULE}.",
            "",
            *claim_lines,
            "",
            f"Rows, descriptive: {_rows_in_words(rows)}.",
            "",
            *(claim_line(row) for _, row in rows.iterrows() if row["verdict"] != NOT_IN_GRID),
        ],
    )


def _count(number: float, noun: str) -> str:
    return f"{int(number)} {noun}{'' if int(number) == 1 else 's'}"


def _rows_in_words(rows: pd.DataFrame) -> str:
    counts = rows["verdict"].value_counts()
    return ", ".join(f"{count} {verdict}" for verdict, count in counts.items())


def tested(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims a run tested: in its grid and not declared not testable at its scale."""
    return claims[~claims["verdict"].isin([NOT_IN_GRID, NOT_TESTABLE])]


def contrast_block(experiment: str, ours: dict[str, pd.DataFrame], others: list[tuple[Path, dict]]) -> str:
    """The `contrast:EXPERIMENT` block: one sentence per claim tested both in this run and in
    another (`tested`) whose verdict differs. `ours` and each of `others` (a source named in the
    block, its tables) map a claims table's name (claims.csv, mechanism_claims.csv) to it."""
    lines, compared = [], 0
    for source, theirs in others:
        for name in (name for name in ours if name in theirs):
            mine, other = tested(ours[name]), tested(theirs[name])
            text = "paper" if "paper" in mine else "statement"
            common = [claim for claim in dict.fromkeys(mine["claim"]) if claim in set(other["claim"])]
            compared += len(common)
            for claim in common:
                our_rows, their_rows = mine[mine["claim"] == claim], other[other["claim"] == claim]
                our_verdict, their_verdict = (" / ".join(dict.fromkeys(t["verdict"])) for t in (our_rows, their_rows))
                if our_verdict != their_verdict:
                    lines.append(
                        f"- {our_rows[text].iloc[0]}: **{their_verdict}** on "
                        f"{', '.join(dict.fromkeys(their_rows['model']))} ({source}), **{our_verdict}** on "
                        f"{', '.join(dict.fromkeys(our_rows['model']))}."
                    )
    sources = " ".join(str(source) for source, _ in others)
    header = (
        f"Generated by `python -m klrl readme-results --contrast {sources}` from the runs' claim tables "
        f"(`claims.csv`, `mechanism_claims.csv`): of the {_count(compared, 'claim')} tested both here and in one "
        f"of those (in its grid, not declared {NOT_TESTABLE}), the {len(lines)} whose verdict differs: {CLAIM_RULE}."
    )
    return marked_block(f"contrast:{experiment}", [header, "", *(lines or ["No claim differs."])])


def mechanism_block(experiment: str, claims: pd.DataFrame, header: str) -> str:
    """The `mechanism:EXPERIMENT` block: each mechanism claim's verdict in the family of claims,
    with its declared size, the gradient that predicts it, its estimate and adjusted p-values."""
    lines = [header, "", f"The family: {FAMILY_RULE}.", ""]
    for _, row in claims.iterrows():
        where = f" ({row['model']})" if isinstance(row["model"], str) and row["model"] else ""
        head = f"- {row['statement']}{where}: **{row['verdict']}**"
        if row["verdict"] == NOT_IN_GRID:
            lines.append(head + ".")
            continue
        lines.append(
            head + f" ({row['measure']}, {row['combine']} over {_count(row['rows'], 'row')}, predicted by "
            f"{row['predicted_by']}: {decision_words(row)})."
        )
    return marked_block(f"mechanism:{experiment}", lines)


def table_block(experiment: str, name: str, table: str, header: str) -> str:
    """A `table:EXPERIMENT:NAME` block holding a run's Markdown table under its provenance line."""
    return marked_block(f"table:{experiment}:{name}", [header, "", table.rstrip("\n")])


def marked_block(marker: str, lines: list[str]) -> str:
    """`lines` between `<!-- MARKER:begin -->` and `<!-- MARKER:end -->`, the form `rewrite` replaces."""
    return "\n".join([f"<!-- {marker}:begin -->", *lines, f"<!-- {marker}:end -->"])


def rewrite(readme: str, block: str) -> str:
    """`readme` with the block of the same markers as `block` (its first and last lines) replaced;
    ValueError if the text lacks them or has them out of order."""
    begin, end_marker = block.splitlines()[0], block.splitlines()[-1]
    start, end = readme.find(begin), readme.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"no {begin} … {end_marker} block to rewrite")
    return readme[:start] + block + readme[end + len(end_marker) :]


def claim_tables(tables: Path) -> dict[str, pd.DataFrame]:
    """A run's claims tables by name: claims.csv, and mechanism_claims.csv where it measured the
    KL; ValueError when it has no claims.csv."""
    if not (tables / "claims.csv").is_file():
        raise ValueError(f"{tables / 'claims.csv'}: no claims table to contrast with")
    names = ("claims.csv", "mechanism_claims.csv")
    return {
        name: pd.read_csv(tables / name, keep_default_na=False, na_values=[""])
        for name in names
        if (tables / name).is_file()
    }


def rewrite_readme(
    readme: Path,
    tables: Path,
    experiment: str,
    config: str,
    run_time: str,
    commit: str | None,
    contrasts: list[tuple[Path, Path]] = (),
) -> int:
    """Rewrite `readme`'s claims block of `experiment` and each of its table blocks from the run's
    `tables`, and with `contrasts` (other runs' tables, each with the source named in the block:
    the published tables they were computed from) its contrast block; the number of table
    blocks. ValueError, with the file untouched, when the claims table, a table a block names, or
    a block's markers are missing."""
    if not (tables / "claims.csv").is_file():
        raise ValueError(f"{tables / 'claims.csv'}: no claims table (run `klrl aggregate` first)")
    ours = claim_tables(tables)
    run_line = run_provenance(tables, commit)
    text = readme.read_text()
    rows_path = tables / "claim_rows.csv"
    if not rows_path.is_file():
        raise ValueError(
            f"{rows_path}: no claim rows (tables from before claims were a family: run `klrl aggregate` again)"
        )
    names = re.findall(TABLE_BLOCK.format(experiment=re.escape(experiment)), text)
    blocks = [claims_block(experiment, ours["claims.csv"], pd.read_csv(rows_path), config, run_time, run_line)]
    for name in names:
        table = tables / f"{name}.md"
        if not table.is_file():
            raise ValueError(f"{table}: the page has a table:{experiment}:{name} block but the run has no such table")
        blocks.append(
            table_block(experiment, name, table.read_text(), provenance(f"{name}.md", config, run_time, run_line))
        )
    if f"<!-- mechanism:{experiment}:begin -->" in text:
        if "mechanism_claims.csv" not in ours:
            raise ValueError(
                f"{tables / 'mechanism_claims.csv'}: the page has a mechanism:{experiment} block but the run has no such table"
            )
        header = provenance("mechanism_claims.csv", config, run_time, run_line)
        blocks.append(mechanism_block(experiment, ours["mechanism_claims.csv"], header))
    if contrasts:
        blocks.append(contrast_block(experiment, ours, [(source, claim_tables(other)) for other, source in contrasts]))
    for block in blocks:
        text = rewrite(text, block)
    readme.write_text(text)
    return len(names)
