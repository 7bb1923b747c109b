"""`klrl cells`: the cell ids of a workflow config, or whether a name is one of them.

    python -m klrl cells --config config/config.yaml              # every cell: id and group
    python -m klrl cells --config config/config.yaml tiny__k1-reward__b0.1__on__s0
                                                                   # exit 1 with close matches if not a cell

The ids are those the workflow's paths use (results/<experiment>/cells/<cell>/...), from klrl.grid.
The config is checked against the schema first (klrl.config_check): a missing key, a wrong type or
an unknown key is one line naming the file and the key. `make run` and `make cells` call this verb.
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from klrl.config_check import read_config
from klrl.grid import expand_grid


def unknown_cell_message(name: str, cells) -> str:
    """One line saying that `name` is no cell of the grid, with its closest cell ids.

    >>> print(unknown_cell_message("tiny__k1-reward__b0.1__on__s7", ["tiny__k1-reward__b0.1__on__s0", "qwen2.5-7b__k3-loss__b1__off__s0"]))
    'tiny__k1-reward__b0.1__on__s7' is not a cell of this config; closest: tiny__k1-reward__b0.1__on__s0 (`python -m klrl cells --config FILE` lists them all)
    """
    close = difflib.get_close_matches(name, list(cells), n=3, cutoff=0.6)
    hint = f"closest: {', '.join(close)}" if close else "no cell id is close"
    return f"{name!r} is not a cell of this config; {hint} (`python -m klrl cells --config FILE` lists them all)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"), help="the workflow config")
    parser.add_argument("name", nargs="?", help="a cell id to check (default: list every cell)")


def run(args: argparse.Namespace) -> None:
    cells = expand_grid(read_config(args.config))
    if args.name is None:
        for cell in cells.values():
            print(f"{cell.id}\t{cell.group}")
    elif args.name in cells:
        print(f"{args.name}\t{cells[args.name].group}")
    else:
        raise SystemExit(unknown_cell_message(args.name, cells))
