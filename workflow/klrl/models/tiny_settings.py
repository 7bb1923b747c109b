"""The tiny base's recipe settings (`TinyConfig`) and its build version. Torch-free: the registry
(klrl.models.builds) and the workflow read them without the model's machinery (klrl.models.tiny)."""

from __future__ import annotations

from dataclasses import dataclass

from klrl.core.allowed import Allowed, setting
from klrl.tasks.arith import FAMILY

# Bump whenever the build's code changes what a recipe makes (the corpus, the training loop, the
# competence check): the hash changes with it, so no folder built by older code is reused.
# tests/models/test_recipe.py pins the default corpus, so a corpus change fails there until this is bumped.
BUILD_VERSION = 2

# The tasks the tiny base reads: the arithmetic family (klrl.tasks.arith). Its corpus draws from
# them (`mix`) and its build measures its competence on each (`check_tasks`).
TINY_TASKS = FAMILY
SHARE = Allowed(minimum=0, maximum=1)


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

    hidden: int = setting("model width", 128, allowed=Allowed(minimum=1))
    layers: int = setting("transformer blocks", 4, allowed=Allowed(minimum=1))
    heads: int = setting("attention heads (head size = hidden / heads)", 2, allowed=Allowed(minimum=1))
    intermediate: int = setting("MLP width", 512, allowed=Allowed(minimum=1))
    steps: int = setting("optimizer steps", 1600, allowed=Allowed(minimum=1))
    batch_tokens: int = setting("tokens per step, padding included", 1024, allowed=Allowed(minimum=1))
    lr: float = setting("peak AdamW learning rate (cosine decay to 10%)", 1e-3, allowed=Allowed(exclusive_minimum=0))
    warmup: int = setting("linear warm-up steps", 100, allowed=Allowed(minimum=0))
    weight_decay: float = setting("AdamW weight decay", 0.1, allowed=Allowed(minimum=0))
    corrupt_prob: float = setting("share of corpus answers with one wrong digit", 0.6, allowed=SHARE)
    clean_fraction: float = setting(
        "first share of the steps with no corrupted answers (learn the skill, then the noise)", 0.75, allowed=SHARE
    )
    mix: dict[str, float] = setting(
        "corpus share of each task of the family",
        factory=lambda: {"arith": 0.6, "arith-long": 0.2, "arith-spoken": 0.2},
        allowed=Allowed(minimum=0),
    )
    seed: int = setting(
        "seed of the corpus, the initial weights and dropout-free training", 0, allowed=Allowed(minimum=0)
    )
    check_tasks: list[str] = setting(
        "tasks whose held-out problems the build scores",
        factory=lambda: list(TINY_TASKS),
        allowed=Allowed(choices=TINY_TASKS),
    )
    check_problems: int = setting(
        "held-out problems per checked task (data seed 0: a config's first test rows)", 150, allowed=Allowed(minimum=1)
    )
    check_samples: int = setting("samples per problem for pass@1 at temperature 1", 4, allowed=Allowed(minimum=1))
    floor: dict[str, float] = setting(
        "least pass@1 the build accepts, by '<task>/greedy' or '<task>/t1' (a miss fails the build)",
        factory=lambda: {"arith/greedy": 0.9, "arith/t1": 0.3, "arith-long/t1": 0.15, "arith-spoken/t1": 0.15},
        allowed=SHARE,
    )

    def __post_init__(self) -> None:
        unknown = sorted(set(self.mix) - set(TINY_TASKS))
        if unknown:
            raise ValueError(f"mix: {unknown[0]!r} is not a task of the tiny base; its tasks: {', '.join(TINY_TASKS)}")
        for key in self.floor:
            task, _, decoding = key.partition("/")
            if task not in self.check_tasks or decoding not in ("greedy", "t1"):
                raise ValueError(
                    f"floor: {key!r} is not '<task>/greedy' or '<task>/t1' of a checked task ({', '.join(self.check_tasks)})"
                )
