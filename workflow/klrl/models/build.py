"""`klrl pretrain-base` (the tiny model) and `klrl convert-base` (SmolLM2), writing model folders
(the workflow's rule build_base runs them, workflow/rules/models.smk)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from klrl.models import BUILT_MODELS, get_base_model


def add_pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    from klrl.models.recipe import TinyConfig

    parser.add_argument("--out", type=Path, required=True, help="model folder to write")
    parser.add_argument(
        "--threads", type=int, help="torch CPU threads (the weights do not depend on it: docs/components.md)"
    )
    kinds = {"int": int, "float": float, "dict[str, float]": json.loads}
    for spec in dataclasses.fields(TinyConfig):
        default = spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()
        flag = f"--{spec.name.replace('_', '-')}"
        text = f"{spec.metadata['help']} (default: {json.dumps(default) if isinstance(default, (dict, list)) else default})".replace(
            "%", "%%"
        )
        if spec.type == "list[str]":
            parser.add_argument(flag, nargs="+", help=text)
        else:
            parser.add_argument(
                flag,
                type=kinds[spec.type],
                help=text.replace("(default", "(JSON; default") if spec.type.startswith("dict") else text,
            )


def run_pretrain(args: argparse.Namespace) -> None:
    import torch

    from klrl.models.recipe import TinyConfig, recipe_hash
    from klrl.models.tiny import pretrain_tiny

    if args.threads:
        torch.set_num_threads(args.threads)
    given = {
        spec.name: getattr(args, spec.name)
        for spec in dataclasses.fields(TinyConfig)
        if getattr(args, spec.name) is not None
    }
    config = TinyConfig(**given)
    report = pretrain_tiny(args.out, config)
    scores = ", ".join(
        f"{task} {score['greedy']:.3f} greedy / {score['t1']:.3f} T=1" for task, score in report["competence"].items()
    )
    print(
        f"tiny base {recipe_hash('tiny', given)} → {args.out}: {report['parameters']:,} parameters, {report['pretrain_seconds']:.0f} s; {scores}"
    )


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    converted = [name for name, model in BUILT_MODELS.items() if model.build == "convert"]
    parser.add_argument("--model", required=True, choices=converted, help="base model to convert")
    parser.add_argument("--out", type=Path, required=True, help="model folder to write")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--layers", type=int, help="keep only the first LAYERS decoder layers (default: all)")


def run_convert(args: argparse.Namespace) -> None:
    from klrl.models.smollm2 import convert_smollm2

    get_base_model(args.model)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    print(f"{args.model} → {convert_smollm2(args.out, args.layers)}")
