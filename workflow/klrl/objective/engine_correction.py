"""The engine mismatch, corrected on the policy term and on the KL term alike.

Rollouts come from an inference engine (vLLM, in bf16) whose per-token log-probs e_t of the
sampled tokens differ from μ_t, those the trainer recomputes for the same weights. Everything
the loss estimates is an expectation over μ (πθ on-policy, the stale weights off-policy); a
sample drawn from e is reweighted by μ/e:
    token level     w_t = μ_t / e_t, one weight per token (the prefix stays e's, so this is exact
                    only for one-token completions),
    sequence level  W = Π_t μ_t / e_t, one weight for the whole sequence: exact,
either truncated (min(w, cap)) or masked (w where 1/cap ≤ w ≤ cap, else 0; a masked token or
sequence gives nothing). Truncation and masking bias the estimate where they act, and bound its
variance. The weight multiplies every per-token loss term before aggregation: the policy term,
which carries a reward-placed penalty through the advantages, and the KL loss term
(`klrl.objective.loss.batch_loss(..., sample_weights=)`); `tests/toy/test_engine_correction.py` proves
it on the toy policy exactly. Metrics per step: mean and max |log μ_t/e_t| over the tokens, and
the fraction of weights (tokens or sequences) truncated or masked.

The trainer applies the correction named by `TrainConfig.engine_correction` (<level>-<mode>,
ENGINE_CORRECTIONS) to rollouts whose engine recorded its log-probs (the vLLM backend). Plain
Python: the functions use tensor methods only, so the training config can import the names
when Snakemake builds the DAG.
"""

from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("token", "sequence")
MODES = ("truncate", "mask")
ENGINE_CORRECTIONS = tuple(f"{level}-{mode}" for level in LEVELS for mode in MODES)


@dataclass(frozen=True)
class EngineCorrection:
    level: str = "sequence"  # one of LEVELS
    mode: str = "truncate"  # one of MODES
    cap: float = 2.0  # truncate weights above it; masking also drops those below 1/cap

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"engine correction level: {self.level!r} is not one of {', '.join(LEVELS)}")
        if self.mode not in MODES:
            raise ValueError(f"engine correction mode: {self.mode!r} is not one of {', '.join(MODES)}")
        if not self.cap > 1:
            raise ValueError(f"engine correction cap: {self.cap!r} must be > 1")

    @classmethod
    def from_name(cls, name: str, cap: float) -> EngineCorrection:
        """`token-truncate`, `sequence-mask`, ... (ENGINE_CORRECTIONS) with its cap."""
        if name not in ENGINE_CORRECTIONS:
            raise ValueError(f"engine correction: {name!r} is not one of {', '.join(ENGINE_CORRECTIONS)}")
        level, mode = name.split("-")
        return cls(level, mode, cap)


def engine_weights(correction: EngineCorrection, anchor_logp, engine_logp, mask) -> tuple:
    """(B, T) weights (constants, 0 on masked-out positions) and the step's metrics, from (B, T)
    tensors of the anchor log μ (the learner's), the engine's log e and the completion mask.

    >>> import torch
    >>> anchor, engine, mask = torch.tensor([[0.0, -1.0]]), torch.tensor([[-1.0, -1.0]]), torch.ones(1, 2)
    >>> weights, metrics = engine_weights(EngineCorrection("token", "truncate", cap=2.0), anchor, engine, mask)
    >>> weights.tolist(), metrics["fraction_corrected"], metrics["max_abs_log_ratio"]
    ([[2.0, 1.0]], 0.5, 1.0)
    """
    mask = mask.to(anchor_logp.dtype)
    log_ratio = ((anchor_logp - engine_logp) * mask).detach()
    if correction.level == "sequence":
        log_weight = log_ratio.sum(-1, keepdim=True)
        units = log_weight.new_ones(log_weight.shape)  # one weight per sequence
    else:
        log_weight, units = log_ratio, mask
    weight = log_weight.exp()
    if correction.mode == "truncate":
        acted = weight > correction.cap
        weight = weight.clamp(max=correction.cap)
    else:
        acted = (weight > correction.cap) | (weight < 1 / correction.cap)
        weight = weight.masked_fill(acted, 0.0)
    tokens = mask.sum().clamp(min=1)
    metrics = {
        "mean_abs_log_ratio": (log_ratio.abs().sum() / tokens).item(),
        "max_abs_log_ratio": log_ratio.abs().max().item(),
        "fraction_corrected": ((acted.to(mask.dtype) * units).sum() / units.sum().clamp(min=1)).item(),
    }
    return weight.expand_as(mask) * mask, metrics
