"""The configuration of one training cell: every knob of `klrl train`, with its meaning.

Read from a YAML file (the workflow writes one per cell) with optional `key=value`
overrides; an unknown key or a bad value is an error that names it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from klrl.choices import ADVANTAGES, AGGREGATIONS, KLConfig
from klrl.files import read_yaml

GENERATION_BACKENDS = ("hf", "vllm")
PRECISIONS = ("none", "bf16")  # bf16: bfloat16 compute over float32 master weights (FSDP)
VLLM_DTYPES = ("float32", "bfloat16", "float16")


def _help(text: str, default=dataclasses.MISSING, factory=dataclasses.MISSING):
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata={"help": text})
    return field(default=default, metadata={"help": text})


@dataclass
class TrainConfig:
    # what to train on
    base_model: str = _help("base model: a Hugging Face folder or Hub id")
    train_data: str = _help("prepared train split (JSONL from `klrl prepare-data`)")
    eval_data: str = _help("prepared held-out in-domain split for the periodic evaluation")
    reward: str = _help("reward name in klrl.rewards (the task's)")
    max_prompt_tokens: int = _help("longest prompt accepted from the data, in tokens: a longer row is an error naming file:line", 2048)
    max_answer_chars: int = _help("longest reference answer accepted from the data, in characters", 1000)
    # the KL penalty
    kl: str = _help("KL configuration, a standard name of klrl.kl (e.g. k1-reward, k3-loss)", "none")
    beta: float = _help("KL coefficient β", 0.0)
    kl_log_ratio_clamp: float | None = _help("clamp δ_t to [−c, c] before the KL estimator", None)
    kl_value_clamp: float | None = _help("clamp each K̂_t to [−c, c] (the paper's async runs: 10)", None)
    kl_is_truncation: float | None = _help("cap the KL correction's importance weight", None)
    # the policy-gradient estimator
    async_lag: int = _help("k: rollouts for step t come from the weights of step t−k (0: on-policy)", 0)
    advantage: str = _help(f"advantage estimator, one of {ADVANTAGES}", "rloo")
    ratio_clamp: float | None = _help("truncate the token importance ratio πθ/μ at c (paper's async: 8)", None)
    ppo_clip: float | None = _help("PPO ratio clip ε (None: no clipping, the paper's setting)", None)
    ppo_epochs: int = _help("passes over each batch (1: one gradient step per batch)", 1)
    minibatches: int = _help("optimizer steps per pass: the batch is split into this many", 1)
    loss_aggregation: str = _help(f"one of {AGGREGATIONS}: seq-sum is the paper's Σ_t per sequence", "seq-sum")
    # batch and sampling
    steps: int = _help("training steps (batches); each makes ppo_epochs × minibatches updates", 100)
    prompts_per_step: int = _help("prompts per batch", 16)
    group_size: int = _help("G: samples per prompt", 8)
    max_new_tokens: int = _help("completion length limit", 8)
    micro_batch_size: int | None = _help("rows per forward/backward pass, the gradient accumulated over them (None: all at once; needs ppo_epochs = minibatches = 1)", None)
    temperature: float = _help("sampling temperature", 1.0)
    top_p: float = _help("nucleus sampling mass", 1.0)
    generation_backend: str = _help(f"rollout generator, one of {GENERATION_BACKENDS}: hf samples with the learner's model, vllm with a colocated vLLM engine", "hf")
    vllm_dtype: str = _help(f"dtype of the vLLM engine's weights, one of {VLLM_DTYPES}", "float32")
    vllm_memory_fraction: float = _help("share of the GPU's memory the colocated vLLM engine may take", 0.3)
    vllm_max_model_len: int | None = _help("vLLM's longest sequence, prompt + completion (None: the model's own)", None)
    # optimizer
    lr: float = _help("AdamW learning rate", 1e-4)
    weight_decay: float = _help("AdamW weight decay", 0.01)
    adam_betas: tuple[float, float] = _help("AdamW betas", factory=lambda: (0.9, 0.99))
    grad_clip: float = _help("gradient-norm clip", 1.0)
    lr_schedule: str = _help("constant or cosine (to 10% of lr)", "constant")
    warmup_steps: int = _help("linear learning-rate warm-up steps", 0)
    # bookkeeping
    seed: int = _help("seed of data order, sampling and evaluation", 0)
    checkpoint_every: int = _help("steps between checkpoints (0: only at the end)", 25)
    eval_every: int = _help("steps between periodic evaluations (0: only before and after)", 25)
    eval_size: int = _help("held-out problems in the periodic evaluation", 64)
    eval_samples: int = _help("samples per problem for the periodic pass@1 (temperature 1.0)", 4)
    collapse_window: int = _help("steps averaged by the collapse detector (0: off)", 20)
    collapse_ratio: float = _help("collapse: windowed accuracy below this fraction of the first window's", 0.2)
    threads: int | None = _help("torch CPU threads (None: torch's default)", None)
    device: str = _help("cpu or cuda (under torchrun, process r uses cuda:LOCAL_RANK)", "cpu")
    # memory (multi-GPU runs: klrl.training.distributed)
    mixed_precision: str = _help(
        f"one of {PRECISIONS}: bf16 computes in bfloat16 through FSDP, float32 master weights and gradient reduction", "none"
    )
    activation_checkpointing: bool = _help("recompute each decoder layer's activations in the backward pass", False)
    reference_offload: bool = _help("under FSDP, keep the reference model's shards in CPU memory between uses", False)

    def __post_init__(self) -> None:
        self.adam_betas = tuple(self.adam_betas)
        self.kl_config()  # validates the KL fields, naming the bad one
        checks = {
            "advantage": self.advantage in ADVANTAGES,
            "loss_aggregation": self.loss_aggregation in AGGREGATIONS,
            "lr_schedule": self.lr_schedule in ("constant", "cosine"),
            "async_lag": self.async_lag >= 0,
            "group_size": self.group_size >= 2,
            "ppo_epochs": self.ppo_epochs >= 1,
            "micro_batch_size": self.micro_batch_size is None or (self.micro_batch_size >= 1 and self.ppo_epochs * self.minibatches == 1),
            "minibatches": self.minibatches >= 1 and (self.prompts_per_step * self.group_size) % self.minibatches == 0,
            "steps": self.steps >= 1,
            "temperature": self.temperature > 0,
            "top_p": 0 < self.top_p <= 1,
            "device": self.device in ("cpu", "cuda"),
            "generation_backend": self.generation_backend in GENERATION_BACKENDS,
            "vllm_dtype": self.vllm_dtype in VLLM_DTYPES,
            "vllm_memory_fraction": 0 < self.vllm_memory_fraction <= 1,
            "mixed_precision": self.mixed_precision in PRECISIONS,
            "activation_checkpointing": isinstance(self.activation_checkpointing, bool),
            "reference_offload": isinstance(self.reference_offload, bool),
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"train config: bad value for {bad[0]!r}: {getattr(self, bad[0])!r} ({_field_help(bad[0])})")

    def kl_config(self) -> KLConfig:
        return KLConfig.from_name(
            self.kl,
            beta=self.beta,
            log_ratio_clamp=self.kl_log_ratio_clamp,
            value_clamp=self.kl_value_clamp,
            is_truncation=self.kl_is_truncation,
        )

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)} | {"adam_betas": list(self.adam_betas)}


def _field_help(name: str) -> str:
    return next(f.metadata["help"] for f in dataclasses.fields(TrainConfig) if f.name == name)


def load_config(path: Path | None, overrides: list[str] = ()) -> TrainConfig:
    """A TrainConfig from a YAML file and `key=value` overrides (values parsed as YAML)."""
    values = read_yaml(path) if path else {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: a train config must be a mapping of keys to values")
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not key=value")
        values[key] = yaml.safe_load(raw)
    fields = dataclasses.fields(TrainConfig)
    known = {f.name for f in fields}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"train config: unknown key {unknown[0]!r}; known keys: {', '.join(sorted(known))}")
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [name for name in required if name not in values]
    if missing:
        raise ValueError(f"train config: missing required key {missing[0]!r} ({_field_help(missing[0])})")
    return TrainConfig(**values)
