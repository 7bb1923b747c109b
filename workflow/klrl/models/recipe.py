"""What a base model built here is made from (its recipe), the recipe's hash, and the folder the
built model is kept in. Torch-free: the Snakefile imports it to name that folder.

A recipe is every setting its build reads, resolved (a config's `models.tiny.pretrain` over
`TinyConfig`'s defaults, so `{}` and `{steps: <the default>}` are one recipe;
`models.smollm2-135m.convert`, whose one option keeps the first `layers` decoder layers), plus
the version of the code that turns it into weights (`BUILD_VERSIONS`). The model is built once per
recipe, into results/bases/<model>-<hash>/model, whichever config asks for it first; every
config with the same recipe reads that folder, and a changed setting is another hash, so
another folder and another build.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from klrl.paths import BASES
from klrl.tasks.arith import FAMILY


# Bump a model's version whenever its build's code changes what a recipe makes (the corpus, the
# training loop, the competence check): the hash changes with it, so no folder built by older
# code is reused. tests/models/test_recipe.py pins the default tiny corpus, so a corpus change fails
# there until this is bumped.
BUILD_VERSIONS = {"tiny": 2, "smollm2-135m": 1}

# The tasks the tiny base reads: the arithmetic family (klrl.tasks.arith). Its corpus draws from
# them (`mix`) and its build measures its competence on each (`check_tasks`).
TINY_TASKS = FAMILY


@dataclass
class TinyConfig:
    """Architecture, pretraining and competence check of the tiny base (every field is recorded
    in the model folder's klrl_pretrain.json, and every field is part of the recipe's hash).

    The defaults are the default recipe. Its peak learning rate is 1e-3: at 2e-3 (the earlier
    recipe, 1,200 steps of 3,072 tokens) the skill appeared late and at a step that moved
    between builds, so a change in the last bits of the kernels (another CPU) decided whether
    a build was competent; at 1e-3 it appears well inside the clean phase, and 1,024-token
    batches (more steps for fewer tokens) cost less than half. The floor fails a build that
    misses it anyway (docs/components.md, "Base models").
    """

    hidden: int = field(default=128, metadata={"help": "model width"})
    layers: int = field(default=4, metadata={"help": "transformer blocks"})
    heads: int = field(default=2, metadata={"help": "attention heads (head size = hidden / heads)"})
    intermediate: int = field(default=512, metadata={"help": "MLP width"})
    steps: int = field(default=1600, metadata={"help": "optimizer steps"})
    batch_tokens: int = field(default=1024, metadata={"help": "tokens per step, padding included"})
    lr: float = field(default=1e-3, metadata={"help": "peak AdamW learning rate (cosine decay to 10%)"})
    warmup: int = field(default=100, metadata={"help": "linear warm-up steps"})
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay"})
    corrupt_prob: float = field(default=0.6, metadata={"help": "share of corpus answers with one wrong digit"})
    clean_fraction: float = field(
        default=0.75,
        metadata={"help": "first share of the steps with no corrupted answers (learn the skill, then the noise)"},
    )
    mix: dict[str, float] = field(
        default_factory=lambda: {"arith": 0.6, "arith-long": 0.2, "arith-spoken": 0.2},
        metadata={"help": "corpus share of each task of the family"},
    )
    seed: int = field(default=0, metadata={"help": "seed of the corpus, the initial weights and dropout-free training"})
    check_tasks: list[str] = field(
        default_factory=lambda: list(TINY_TASKS), metadata={"help": "tasks whose held-out problems the build scores"}
    )
    check_problems: int = field(
        default=150, metadata={"help": "held-out problems per checked task (data seed 0: a config's first test rows)"}
    )
    check_samples: int = field(default=4, metadata={"help": "samples per problem for pass@1 at temperature 1"})
    floor: dict[str, float] = field(
        default_factory=lambda: {"arith/greedy": 0.9, "arith/t1": 0.3, "arith-long/t1": 0.15, "arith-spoken/t1": 0.15},
        metadata={"help": "least pass@1 the build accepts, by '<task>/greedy' or '<task>/t1' (a miss fails the build)"},
    )

    def __post_init__(self) -> None:
        family = set(TINY_TASKS)
        for name, tasks in (("mix", self.mix), ("check_tasks", self.check_tasks)):
            unknown = sorted(set(tasks) - family)
            if unknown:
                raise ValueError(
                    f"{name}: {unknown[0]!r} is not a task of the tiny base; its tasks: {', '.join(TINY_TASKS)}"
                )
        for key in self.floor:
            task, _, decoding = key.partition("/")
            if task not in self.check_tasks or decoding not in ("greedy", "t1"):
                raise ValueError(
                    f"floor: {key!r} is not '<task>/greedy' or '<task>/t1' of a checked task ({', '.join(self.check_tasks)})"
                )


def tiny_recipe(options: dict | None) -> TinyConfig:
    """The tiny recipe of a config's `models.tiny.pretrain` options; an unknown key is an error."""
    known = [spec.name for spec in fields(TinyConfig)]
    unknown = sorted(set(options or {}) - set(known))
    if unknown:
        raise ValueError(f"models.tiny.pretrain: unknown key {unknown[0]!r}; known: {', '.join(known)}")
    return TinyConfig(**(options or {}))


def convert_layers(options: dict | None) -> int | None:
    """The decoder layers a config's `models.smollm2-135m.convert` options keep (None: all 30,
    however they are asked for); an unknown key or a count outside 1-30 is an error."""
    from klrl.models.smollm2 import DECODER_LAYERS

    unknown = sorted(set(options or {}) - {"layers"})
    if unknown:
        raise ValueError(f"models.smollm2-135m.convert: unknown key {unknown[0]!r}; known: layers")
    layers = (options or {}).get("layers")
    if layers is None:
        return None
    if not isinstance(layers, int) or isinstance(layers, bool) or not 1 <= layers <= DECODER_LAYERS:
        raise ValueError(
            f"models.smollm2-135m.convert.layers: {layers!r} is not a number of layers from 1 to {DECODER_LAYERS}"
        )
    return None if layers == DECODER_LAYERS else layers


def recipe(model: str, options: dict | None) -> dict:
    """The resolved recipe of a built model (what its hash covers). A whole SmolLM2 has no
    `layers` setting, so its hash is the one it had before the option existed."""
    if model == "tiny":
        settings = asdict(tiny_recipe(options))
    else:
        from klrl.models.smollm2 import GGUF_NAME, PACKAGE, PACKAGE_VERSION

        settings = {"package": PACKAGE, "package_version": PACKAGE_VERSION, "file": GGUF_NAME}
        layers = convert_layers(options)
        if layers is not None:
            settings["layers"] = layers
    return {"model": model, "build_version": BUILD_VERSIONS[model], "settings": settings}


def recipe_hash(model: str, options: dict | None) -> str:
    """12 hex digits of the sha256 of the resolved recipe, as canonical JSON."""
    text = json.dumps(recipe(model, options), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def base_folder(model: str, options: dict | None) -> Path:
    """results/bases/<model>-<hash>: the built model (model/), its build log and benchmark."""
    return BASES / f"{model}-{recipe_hash(model, options)}"


def build_arguments(model: str, options: dict | None) -> list[str]:
    """The options of the model's build verb (pretrain-base, convert-base) that make its recipe:
    every setting spelled out, so two configs with one recipe run the same command."""
    if model != "tiny":
        layers = convert_layers(options)
        return ["--model", model] + ([] if layers is None else ["--layers", str(layers)])
    arguments = []
    for key, value in asdict(tiny_recipe(options)).items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, list):
            arguments += [flag, *value]
        else:
            arguments += [
                flag,
                json.dumps(value, sort_keys=True, separators=(",", ":")) if isinstance(value, dict) else str(value),
            ]
    return arguments
