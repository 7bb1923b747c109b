"""`klrl fetch`: download every Hub model and data set a config's grid needs, before the grid
(klrl.grid.hub_access), so that its jobs run with the Hub offline.

    python -m klrl fetch --config config/paper.yaml --datasets hub-datasets
    export HF_HUB_OFFLINE=1 KLRL_HUB_DATASETS=$PWD/hub-datasets   # then the grid

Models go to the Hub cache (HF_HOME or HF_HUB_CACHE), data sets to copies under --datasets, the
layout KLRL_HUB_DATASETS reads (klrl.tasks.hub). A gated model needs its licence accepted on
the Hub and a token (HF_TOKEN, or `hf auth login`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "download a config's Hub models and data sets into the caches, before the grid"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="the workflow config")
    parser.add_argument("--datasets", type=Path, default=Path("hub-datasets"), help="where the data set copies go")


def run(args: argparse.Namespace) -> None:
    from klrl.grid.config_check import read_config
    from klrl.grid.expansion import expand_grid
    from klrl.grid.hub_access import fetch

    config = read_config(args.config)
    fetch(config, expand_grid(config), args.datasets)
    print(f"fetched; for the grid: export HF_HUB_OFFLINE=1 KLRL_HUB_DATASETS={args.datasets.resolve()}")
