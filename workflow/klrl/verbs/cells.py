"""`klrl cells`: the cell ids of a workflow config, or whether a name is one of them.

    python -m klrl cells --config config/config.yaml              # every cell: id and group
    python -m klrl cells --config config/config.yaml tiny__k1-reward__b0.1__on__s0
                                                                   # exit 1 with close matches if not a cell

The ids are those the workflow's paths use (results/<experiment>/cells/<cell>/...), from klrl.grid.expansion.
The config is checked against the schema first (klrl.grid.config_check): a missing key, a wrong type or
an unknown key is one line naming the file and the key. `make run` and `make cells` call this verb.
"""

from __future__ import annotations

import argparse
from pathlib import Path


HELP = "list a config's cell ids, or check that a name is one (suggesting close matches)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"), help="the workflow config")
    parser.add_argument("name", nargs="?", help="a cell id to check (default: list every cell)")


def run(args: argparse.Namespace) -> None:
    from klrl.grid.config_check import read_config
    from klrl.grid.expansion import expand_grid, unknown_cell_message

    cells = expand_grid(read_config(args.config))
    if args.name is None:
        for cell in cells.values():
            print(f"{cell.id}\t{cell.group}")
    elif args.name in cells:
        print(f"{args.name}\t{cells[args.name].group}")
    else:
        raise SystemExit(unknown_cell_message(args.name, cells))
