"""`klrl readme-results` (`make readme-results`): the generated blocks of one experiment in docs/results.md
(claims, tables) rewritten from a finished run's tables, or computed again from the run's
published tables (docs/results/<experiment>/, klrl.analysis.published) by the code of the
moment; `--publish` writes those published tables from a run (klrl.reports.readme_blocks). A run's
time is the one its workflow recorded (klrl.grid.wall_time), unless `--run-time` gives it."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

HELP = "rewrite the results blocks of docs/results.md from a run's tables or its published tables"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--tables", type=Path, help="folder with claims.csv (results/<experiment>/tables)")
    source.add_argument(
        "--published",
        type=Path,
        help="a run's published tables (docs/results/<experiment>): the blocks computed again from its scores",
    )
    parser.add_argument(
        "--experiment", required=True, help="whose blocks to rewrite (claims:EXPERIMENT, table:EXPERIMENT:NAME)"
    )
    parser.add_argument(
        "--doc", type=Path, default=Path("docs/results.md"), help="the Markdown file holding the blocks"
    )
    parser.add_argument("--config", help="the config the run used, e.g. config/study.yaml (with --tables)")
    parser.add_argument(
        "--run-time",
        help="with --tables: the run's wall time as text, for a run made before the workflow recorded it "
        "(default: computed from results/<experiment>/wall_times.jsonl, klrl.grid.wall_time)",
    )
    parser.add_argument(
        "--commit", help="the commit the run used, for tables whose cells record none (default: git rev-parse HEAD)"
    )
    parser.add_argument(
        "--contrast",
        type=Path,
        nargs="+",
        default=[],
        help="other runs' tables (results/<experiment>/tables) or published tables (docs/results/<experiment>): "
        "rewrite the contrast:EXPERIMENT block with a sentence per claim whose verdict differs between this run "
        "and one of them",
    )
    parser.add_argument(
        "--publish",
        type=Path,
        help="with --tables: write the run's published tables to this folder (docs/results/<experiment>) "
        "instead of rewriting the blocks",
    )


def run(args: argparse.Namespace) -> None:
    from klrl.reports.readme_blocks import rewrite_readme

    if args.tables and not args.config:
        raise ValueError("readme-results: --tables needs --config (a published run records it)")
    if args.tables and not args.run_time:
        from klrl.core.paths import Layout
        from klrl.grid.wall_time import run_time

        args.run_time = run_time(Layout(args.tables.parent).wall_times())
    if args.publish:
        if not args.tables:
            raise ValueError("readme-results: --publish writes a run's tables: give --tables")
        _publish(args)
        return
    from klrl.analysis.published import is_published, regenerate

    with tempfile.TemporaryDirectory() as scratch:
        tables, config, run_time = args.tables, args.config, args.run_time
        if args.published:
            tables = Path(scratch) / "published"
            run = regenerate(args.published, tables)
            config, run_time = run["config"], run["run_time"]
        contrasts = []
        for number, source in enumerate(args.contrast):
            other = source
            if is_published(source):
                other = Path(scratch) / f"contrast-{number}"
                regenerate(source, other)
            contrasts.append((other, source))
        count = rewrite_readme(args.doc, tables, args.experiment, config, run_time, args.commit, contrasts)
    contrast = f", and the contrast with {' '.join(map(str, args.contrast))}" if args.contrast else ""
    print(
        f"{args.doc}: claims block and {count} table block(s) rewritten from {args.published or args.tables}{contrast}"
    )


def _publish(args: argparse.Namespace) -> None:
    import pandas as pd

    from klrl.analysis.published import publish
    from klrl.analysis.tables import Results

    scores = args.tables / "scores.csv"
    if not scores.is_file():
        raise ValueError(f"{scores}: no scores table (run `klrl aggregate` first)")
    cells = list(dict.fromkeys(pd.read_csv(scores)["cell"]))
    publish(Results(cells, args.tables.parent), args.tables, args.publish, args.config, args.run_time)
    print(f"{args.publish}: the published tables of {len(cells)} cells from {args.tables.parent}")
