"""The configuration of one training cell: every knob of `klrl train`, with its meaning.

Read from a JSON or YAML file (the workflow writes one per cell with a serializer) with
optional `key=value` overrides parsed by each field's type; every value is checked against its
field's annotation and the values it admits (declared on the field, klrl.core.allowed: the workflow's
schema is generated from the same declarations, klrl.grid.config_schema), and an unknown key, a wrong type or a value that would make
training silently do nothing is an error that names the field.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from klrl.core.allowed import Allowed, first_refused, setting
from klrl.objective.choices import ADVANTAGES, AGGREGATIONS
from klrl.objective.engine_correction import ENGINE_CORRECTIONS
from klrl.objective.kl_config import KL_OPTIONS, KLConfig
from klrl.core.files import read_yaml
from klrl.core.typed import check_fields, field_hint, from_mapping, parse_text

GENERATION_BACKENDS = ("hf", "vllm")
PRECISIONS = ("none", "bf16", "bf16-autocast")  # over float32 master weights: klrl.training.precision
VLLM_DTYPES = ("float32", "bfloat16", "float16")
LR_SCHEDULES = ("constant", "cosine")
DEVICES = ("cpu", "cuda")


@dataclass
class TrainConfig:
    # what to train on
    base_model: str = setting("base model: a Hugging Face folder or Hub id")
    train_data: str = setting("prepared train split (JSONL from `klrl prepare-data`)")
    eval_data: str = setting("prepared held-out in-domain split for the periodic evaluation")
    reward: str = setting("reward name in klrl.grading.rewards (the task's)")
    model: str | None = setting(
        "the base model's name in the workflow config (informational: the tables and MLflow; None outside a grid)", None
    )
    task: str | None = setting(
        "the training task's name, its test split the in-domain evaluation (informational: the tables and MLflow; None outside a grid)",
        None,
    )
    base_revision: str | None = setting(
        "the Hub revision (branch, tag or commit) of base_model (None: the default branch)", None
    )
    stop_tokens: tuple[str, ...] = setting(
        "tokens that end a completion besides the EOS and the chat template's end of turn", factory=tuple
    )
    max_prompt_tokens: int = setting(
        "longest prompt accepted from the data, in tokens: a longer row is an error naming file:line",
        2048,
        allowed=Allowed(minimum=1),
    )
    max_answer_chars: int = setting(
        "longest reference answer accepted from the data, in characters", 1000, allowed=Allowed(minimum=1)
    )
    # the KL penalty
    kl: KLConfig = setting(
        f"the KL penalty: name (a standard name of klrl.objective.kl, e.g. k1-reward), beta (β) and the options {', '.join(KL_OPTIONS)} (klrl.objective.kl_config.KLConfig)",
        factory=KLConfig,
    )
    # the policy-gradient estimator
    async_lag: int = setting(
        "k: rollouts for step t come from the weights of step t−k (0: on-policy)", 0, allowed=Allowed(minimum=0)
    )
    advantage: str = setting(f"advantage estimator, one of {ADVANTAGES}", "rloo", allowed=Allowed(choices=ADVANTAGES))
    ratio_clamp: float | None = setting(
        "truncate the token importance ratio πθ/μ at c (paper's async: 8)", None, allowed=Allowed(exclusive_minimum=0)
    )
    ppo_clip: float | None = setting(
        "PPO ratio clip ε (None: no clipping, the paper's setting)", None, allowed=Allowed(exclusive_minimum=0)
    )
    ppo_epochs: int = setting("passes over each batch (1: one gradient step per batch)", 1, allowed=Allowed(minimum=1))
    minibatches: int = setting(
        "optimizer steps per pass: the batch is split into this many", 1, allowed=Allowed(minimum=1)
    )
    loss_aggregation: str = setting(
        f"one of {AGGREGATIONS}: seq-sum is the paper's Σ_t per sequence",
        "seq-sum",
        allowed=Allowed(choices=AGGREGATIONS),
    )
    # batch and sampling
    steps: int = setting(
        "training steps (batches); each makes ppo_epochs × minibatches updates", 100, allowed=Allowed(minimum=1)
    )
    prompts_per_step: int = setting("prompts per batch", 16, allowed=Allowed(minimum=1))
    group_size: int = setting("G: samples per prompt", 8, allowed=Allowed(minimum=2))
    max_new_tokens: int = setting("completion length limit", 8, allowed=Allowed(minimum=1))
    micro_batch_size: int | None = setting(
        "rows per forward/backward pass, the gradient accumulated over them (None: all at once); any ppo_epochs and minibatches",
        None,
        allowed=Allowed(minimum=1),
    )
    temperature: float = setting("sampling temperature", 1.0, allowed=Allowed(exclusive_minimum=0))
    top_p: float = setting("nucleus sampling mass", 1.0, allowed=Allowed(exclusive_minimum=0, maximum=1))
    generation_backend: str = setting(
        f"rollout generator, one of {GENERATION_BACKENDS}: hf samples with the learner's model, vllm with a colocated vLLM engine",
        "hf",
        allowed=Allowed(choices=GENERATION_BACKENDS),
    )
    vllm_dtype: str = setting(
        f"dtype of the vLLM engine's weights, one of {VLLM_DTYPES}", "float32", allowed=Allowed(choices=VLLM_DTYPES)
    )
    vllm_memory_fraction: float = setting(
        "share of the GPU's memory the colocated vLLM engine may take",
        0.3,
        allowed=Allowed(exclusive_minimum=0, maximum=1),
    )
    vllm_max_model_len: int | None = setting(
        "vLLM's longest sequence, prompt + completion (None: the model's own)", None, allowed=Allowed(minimum=1)
    )
    engine_correction: str | None = setting(
        f"weight each vllm rollout by the trainer's μ over the engine's log-probs on the policy and KL terms, one of {ENGINE_CORRECTIONS} "
        "(<level>-<mode>, klrl.objective.engine_correction; needs temperature 1 and top_p 1: the engine reports raw log-probs); None: no weights, "
        "the mismatch metrics recorded all the same",
        None,
        allowed=Allowed(choices=ENGINE_CORRECTIONS),
    )
    engine_cap: float = setting(
        "the engine correction's cap on μ/e: truncated above it, or masked outside [1/cap, cap]",
        2.0,
        allowed=Allowed(exclusive_minimum=1),
    )
    # optimizer
    lr: float = setting("AdamW learning rate", 1e-4, allowed=Allowed(exclusive_minimum=0))
    weight_decay: float = setting("AdamW weight decay", 0.01, allowed=Allowed(minimum=0))
    adam_betas: tuple[float, float] = setting(
        "AdamW betas", factory=lambda: (0.9, 0.99), allowed=Allowed(minimum=0, exclusive_maximum=1)
    )
    fused_adamw: bool = setting(
        "AdamW's fused kernel (torch's fused=True): one pass over the parameters, about 3× faster on a CPU than the default foreach kernel, equal to it up to rounding",
        False,
    )
    grad_clip: float = setting("gradient-norm clip", 1.0, allowed=Allowed(exclusive_minimum=0))
    lr_schedule: str = setting("constant or cosine (to 10% of lr)", "constant", allowed=Allowed(choices=LR_SCHEDULES))
    warmup_steps: int = setting("linear learning-rate warm-up steps", 0, allowed=Allowed(minimum=0))
    # bookkeeping
    seed: int = setting("seed of data order, sampling and evaluation", 0)
    checkpoint_every: int = setting("steps between checkpoints (0: only at the end)", 25, allowed=Allowed(minimum=0))
    eval_every: int = setting(
        "steps between periodic evaluations (0: only before and after)", 25, allowed=Allowed(minimum=0)
    )
    eval_size: int = setting("held-out problems in the periodic evaluation", 64, allowed=Allowed(minimum=1))
    eval_samples: int = setting(
        "samples per problem for the periodic pass@1 (temperature 1.0)", 4, allowed=Allowed(minimum=1)
    )
    collapse_window: int = setting("steps averaged by the collapse detector (0: off)", 20, allowed=Allowed(minimum=0))
    collapse_ratio: float = setting(
        "collapse: windowed accuracy below this fraction of the first window's",
        0.2,
        allowed=Allowed(minimum=0, maximum=1),
    )
    threads: int | None = setting("torch CPU threads (None: torch's default)", None, allowed=Allowed(minimum=1))
    device: str = setting(
        "cpu or cuda (under torchrun, process r uses cuda:LOCAL_RANK)", "cpu", allowed=Allowed(choices=DEVICES)
    )
    # memory (multi-GPU runs: klrl.training.distributed)
    mixed_precision: str = setting(
        f"one of {PRECISIONS}, each over float32 master weights: bf16 computes in bfloat16 through FSDP (gradients reduced in float32); bf16-autocast runs the linear layers' products in bfloat16 by torch.autocast, which one process does without FSDP (the fast path of a CPU with AMX)",
        "none",
        allowed=Allowed(choices=PRECISIONS),
    )
    activation_checkpointing: bool = setting("recompute each decoder layer's activations in the backward pass", False)
    reference_offload: bool = setting("under FSDP, keep the reference model's shards in CPU memory between uses", False)

    def __post_init__(self) -> None:
        check_fields(self, "train config")
        bad = first_refused(self)
        if bad is None and (self.prompts_per_step * self.group_size) % self.minibatches:
            bad = "minibatches"  # a batch split into equal minibatches
        if bad:
            raise ValueError(f"train config: bad value for {bad!r}: {getattr(self, bad)!r} ({_field_help(bad)})")
        if self.async_lag > self.steps:
            raise ValueError(
                f"train config: async_lag {self.async_lag} is larger than the cell's {self.steps} steps "
                "(every rollout would come from the base; at most `steps`)"
            )
        if self.engine_correction is not None and (
            self.generation_backend != "vllm" or (self.temperature, self.top_p) != (1.0, 1.0)
        ):
            raise ValueError(
                f"train config: engine_correction {self.engine_correction!r} needs generation_backend 'vllm', temperature 1 and top_p 1 "
                "(only the vLLM engine records its log-probs, before temperature and top-p)"
            )

    def to_dict(self) -> dict:
        """Plain values, the form of a settings file: `kl` as its settings mapping, tuples as lists."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return values | {
            "kl": self.kl.settings(),
            "adam_betas": list(self.adam_betas),
            "stop_tokens": list(self.stop_tokens),
        }

    def params(self) -> dict:
        """Flat key → value pairs for MLflow: the KL configuration as `kl` (its name), `beta` and `kl.<option>`."""
        values = self.to_dict()
        kl = values.pop("kl")
        return values | {"kl": kl["name"], "beta": kl["beta"]} | {f"kl.{key}": kl[key] for key in KL_OPTIONS}


def _field_help(name: str) -> str:
    return next(f.metadata["help"] for f in dataclasses.fields(TrainConfig) if f.name == name)


def load_config(path: Path | None, overrides: list[str] = ()) -> TrainConfig:
    """A TrainConfig from a settings file (JSON or YAML) and `key=value` overrides, each value
    parsed by its field's type (`kl.<name|beta|option>=value` for the KL settings)."""
    values = {}
    if path:
        if Path(path).suffix == ".json":
            try:
                values = json.loads(Path(path).read_text())
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{error.lineno}:{error.colno}: not valid JSON ({error.msg})") from None
        else:
            values = read_yaml(path)
        if not isinstance(values, dict):
            raise ValueError(f"{path}: a train config must be a mapping of keys to values")
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not key=value")
        _apply_override(values, key.strip(), raw)
    return from_mapping(TrainConfig, values, "train config")


def _apply_override(values: dict, key: str, raw: str) -> None:
    if key.startswith("kl."):
        option = key[3:]
        kl = dict(values.get("kl", {}))
        hint = str if option == "name" else field_hint(KLConfig, option) if option in ("beta", *KL_OPTIONS) else None
        if hint is None:
            raise ValueError(
                f"override {key!r}: unknown KL setting; known: kl.name, kl.beta, "
                + ", ".join(f"kl.{o}" for o in KL_OPTIONS)
            )
        kl[option] = parse_text(hint, raw, f"train config.{key}")
        values["kl"] = kl
        return
    if key not in {f.name for f in dataclasses.fields(TrainConfig)} or key == "kl":
        raise ValueError(
            f"override {key!r}: unknown train config key (the KL settings are kl.name, kl.beta, kl.<option>)"
        )
    values[key] = parse_text(field_hint(TrainConfig, key), raw, f"train config.{key}")


def config_keys_help() -> str:
    """Every TrainConfig key with its meaning and default, for `klrl train --help`."""
    lines = [
        "config keys (a --config JSON/YAML file, or --set KEY=VALUE; the KL settings as --set kl.name=..., kl.beta=..., kl.<option>=...):"
    ]
    for f in dataclasses.fields(TrainConfig):
        if f.default is not dataclasses.MISSING:
            default = f" (default: {f.default})"
        elif f.default_factory is not dataclasses.MISSING:
            made = f.default_factory()
            default = f" (default: {made.settings() if isinstance(made, KLConfig) else made})"
        else:
            default = " (required)"
        lines.append(f"  {f.name}: {f.metadata['help']}{default}")
    return "\n".join(lines)
