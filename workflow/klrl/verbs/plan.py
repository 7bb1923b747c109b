"""`klrl plan`: a config's analysis plan and its hash, written before the first cell trains
(klrl.analysis.preregistration); the workflow's rule plan runs it. `--verify` recomputes recorded
hashes from the plans stored with them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "write a config's analysis plan and its hash (before the first cell trains)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", type=Path, help="a workflow config (YAML), e.g. config/study.yaml")
    source.add_argument("--config-json", help="the workflow's config as JSON (the rule `plan` passes it)")
    source.add_argument(
        "--verify",
        metavar="FILE[:LINE]",
        help="a plans.jsonl (every line, or line LINE) or a plan.json: recompute each recorded hash from its stored plan",
    )


def run(args: argparse.Namespace) -> None:
    import yaml

    from klrl.analysis.preregistration import record_plan, verify
    from klrl.core.paths import Layout

    if args.verify:
        print("\n".join(verify(args.verify)))
        return
    config = json.loads(args.config_json) if args.config_json else yaml.safe_load(args.config.read_text())
    if not isinstance(config, dict) or "experiment" not in config:
        raise ValueError("plan: the config has no `experiment` (a workflow config, e.g. config/study.yaml)")
    digest, new = record_plan(config)
    layout = Layout.of(config)
    print(f"{layout.plan()}: plan {digest} ({'recorded in ' + str(layout.plans()) if new else 'unchanged'})")
