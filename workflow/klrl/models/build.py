"""`klrl pretrain-base` (the tiny model) and `klrl convert-base` (SmolLM2), writing model folders."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from klrl.models import BUILT_MODELS, get_base_model


def add_pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    from klrl.models.tiny import TinyConfig

    parser.add_argument("--out", type=Path, required=True, help="model folder to write")
    for spec in dataclasses.fields(TinyConfig):
        if spec.type in ("int", "float"):
            kind = int if spec.type == "int" else float
            parser.add_argument(f"--{spec.name.replace('_', '-')}", type=kind, default=spec.default, help=spec.metadata["help"].replace("%", "%%"))
    parser.add_argument("--mix", type=json.loads, help="corpus shares as JSON, e.g. '{\"arith\": 1.0}'")


def run_pretrain(args: argparse.Namespace) -> None:
    from klrl.models.tiny import TinyConfig, pretrain_tiny

    values = {spec.name: getattr(args, spec.name) for spec in dataclasses.fields(TinyConfig) if spec.name != "mix"}
    config = TinyConfig(**values, **({"mix": args.mix} if args.mix else {}))
    report = pretrain_tiny(args.out, config)
    print(f"tiny base → {args.out}: {report['parameters']:,} parameters, {report['pretrain_seconds']:.0f} s")


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    converted = [name for name, model in BUILT_MODELS.items() if model.build == "convert"]
    parser.add_argument("--model", required=True, choices=converted, help="base model to convert")
    parser.add_argument("--out", type=Path, required=True, help="model folder to write")


def run_convert(args: argparse.Namespace) -> None:
    from klrl.models.smollm2 import convert_smollm2

    get_base_model(args.model)
    print(f"{args.model} → {convert_smollm2(args.out)}")
