"""`klrl budget`: what a config's grid of Hub models costs before it runs (klrl.grid.run_budget).

    python -m klrl budget --config config/paper.yaml                            # print it
    python -m klrl budget --config config/paper.yaml --write docs/paper-scale.md  # and rewrite its block

Per model and policy mode: cells, GPU-hours of training, peak host memory per node, GPU memory
per device, a checkpoint's bytes, the disk of a running cell and a final model; for the grid:
GPU-hours, evaluation jobs, disk, and every model and data set downloaded (gated or not). The
block of `--write` is `<!-- budget:<experiment>:begin -->` … `end`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "GPU-hours, memory, checkpoints, disk and downloads of a config's grid, before it runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="the workflow config")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs of one node")
    parser.add_argument("--write", type=Path, help="rewrite this file's budget:<experiment> block with the budget")


def run(args: argparse.Namespace) -> None:
    from klrl.grid.run_budget import budget_lines, grid_budget
    from klrl.grid.config_check import read_config

    if args.gpus_per_node < 1:
        raise ValueError(f"--gpus-per-node {args.gpus_per_node} must be at least 1")
    config = read_config(args.config)
    command = f"python -m klrl budget --config {args.config}"
    if args.gpus_per_node != 8:
        command += f" --gpus-per-node {args.gpus_per_node}"
    lines = budget_lines(grid_budget(config, args.gpus_per_node), command)
    print("\n".join(lines))
    if args.write:
        from klrl.reports.readme_blocks import marked_block, rewrite

        block = marked_block(f"budget:{config['experiment']}", lines)
        args.write.write_text(rewrite(args.write.read_text(), block))
