"""Log-probabilities of sampled completions, and exact per-token distribution statistics.

`completion_logits` runs a model over prompt + completion and returns the logits that
predict each completion token (each distinct prompt computed once); `token_logp` picks the
sampled tokens' log-probs from them; `Forward` is how the trainer runs them, in its precision
and micro-batches (the actor for log μ, the learner for πθ and πref); `token_divergences` and
`prefix_sums` give the exact per-prefix KLs and entropy that the trainer logs
(`distribution_stats`) and the final evaluation measures (klrl.evaluation.mechanism).
Logits are divided by the sampling temperature, so the log-probs are those of the
distribution the tokens were drawn from (top-p truncation aside).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from klrl.training.precision import forward_precision
from klrl.training.sampling import Rollout, position_ids, prompt_cache, with_cache


def completion_logits(
    model, rollout: Rollout, temperature: float = 1.0, device: torch.device | None = None, share_prompts: bool = True
) -> torch.Tensor:
    """(B, L, V) float32 logits predicting completion token t from everything before it,
    on `device`: where the model computes, by default its parameters' device (a model whose
    FSDP shards are offloaded to the CPU computes elsewhere).

    With `share_prompts` each distinct prompt runs once (`prompt_cache`) and the completions
    attend to its cached keys and values: the G samples of a group share one prompt forward,
    and its backward. The policy, the reference and μ are scored by the same call, so two
    models with equal weights give equal log-probs bit for bit. Without it (activation
    checkpointing, which cannot keep a cache: transformers drops it) each row runs whole.
    """
    device = device or next(model.parameters()).device
    mask = rollout.attention_mask.to(device)
    length = rollout.completion_ids.shape[1]
    if not share_prompts:
        # Only the positions that predict completion tokens reach the output layer (a
        # vocabulary-wide matmul per position); by index, as in `prompt_cache`.
        width = rollout.prompt_ids.shape[1]
        keep = torch.arange(width - 1, width + length - 1, device=device)
        out = model(
            input_ids=rollout.input_ids.to(device),
            attention_mask=mask,
            position_ids=position_ids(mask),
            logits_to_keep=keep,
        )
        logits = out.logits.float()
    else:
        first, cache = prompt_cache(model, rollout.prompt_ids.to(device), rollout.prompt_mask.to(device))
        logits = first[:, None].float()
        if length > 1:  # completion tokens 0 … L−2 predict tokens 1 … L−1
            width = rollout.prompt_ids.shape[1]
            visible = mask[:, : width + length - 1]
            positions = position_ids(visible)[:, width:]
            tokens = rollout.completion_ids[:, : length - 1].to(device)
            out = model(input_ids=tokens, attention_mask=visible, position_ids=positions, **with_cache(model, cache))
            logits = torch.cat([logits, out.logits.float()], dim=1)
    return logits / temperature if temperature not in (0, 1) else logits  # ÷1 is exact: a vocabulary-wide copy saved


def token_logp(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[token] per position: (B, L)."""
    return torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)


def token_divergences(logits: torch.Tensor, other_logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """Exact per-position KL(p‖q), KL(q‖p) and entropy H(p), where p = softmax(logits) and q =
    softmax(other_logits), from the full softmax: (B, L) each, no gradient."""
    log_p = torch.log_softmax(logits.detach(), dim=-1)
    log_q = torch.log_softmax(other_logits.detach(), dim=-1)
    p, q = log_p.exp(), log_q.exp()
    return {
        "kl_pq": (p * (log_p - log_q)).sum(-1),
        "kl_qp": (q * (log_q - log_p)).sum(-1),
        "entropy_p": -(p * log_p).sum(-1),
    }


def prefix_sums(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per sequence, the sum of per-position values over its completion tokens: (B,)."""
    return (values * mask.float()).sum(-1)


def distribution_stats(policy_logits: torch.Tensor, ref_logits: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Exact per-token reverse KL(πθ‖πref), forward KL(πref‖πθ) and entropy of πθ, from the
    full softmax at every sampled prefix (`token_divergences`): token means and per-sequence
    sums (`prefix_sums`, batch means).

    The prefixes are sampled from πθ. Summed over a sequence, the reverse KL is an unbiased
    estimate of the sequence-level KL(πθ‖πref) (chain rule); the forward one is NOT the
    sequence-level KL(πref‖πθ), which would need prefixes from πref (klrl.evaluation.mechanism
    samples them): it is named `forward_kl_policy_prefixes` for what it is, Σ_t KL(πref‖πθ)(·|y<t)
    with y ~ πθ."""
    divergences = token_divergences(policy_logits, ref_logits)
    per_token = {
        "reverse_kl": divergences["kl_pq"],
        "forward_kl_policy_prefixes": divergences["kl_qp"],
        "entropy": divergences["entropy_p"],
    }
    n_tokens = mask.float().sum().clamp(min=1)
    stats = {}
    for name, values in per_token.items():
        sums = prefix_sums(values, mask)
        stats[f"exact/{name}_token"] = (sums.sum() / n_tokens).item()
        stats[f"exact/{name}_seq"] = sums.mean().item()
    return stats


def combine_distribution_stats(parts: list[dict[str, float]], masks: list[torch.Tensor]) -> dict[str, float]:
    """`distribution_stats` of a batch from those of its row chunks (micro-batches): the token
    means weighted by the chunks' token counts, the sequence means by their rows."""
    weights = {"token": [mask.sum().item() for mask in masks], "seq": [mask.shape[0] for mask in masks]}
    combined = {}
    for key in parts[0]:
        chunk_weights = weights["token" if key.endswith("_token") else "seq"]
        combined[key] = sum(w * part[key] for w, part in zip(chunk_weights, parts)) / max(sum(chunk_weights), 1)
    return combined


@dataclass(frozen=True)
class Forward:
    """How the trainer runs a model over rollout rows: at the sampling temperature, in the
    configured precision (klrl.training.precision), micro-batch by micro-batch."""

    temperature: float
    precision: str
    device: torch.device
    share_prompts: bool  # each distinct prompt once; off under activation checkpointing (no cache)
    micro_batch_size: int | None  # rows per forward/backward, all at once when None

    def micro_batches(self, index: torch.Tensor) -> list[torch.Tensor]:
        """The row indices `index` in chunks of `micro_batch_size`, in order.

        >>> Forward(1.0, "none", torch.device("cpu"), True, 2).micro_batches(torch.arange(5))
        [tensor([0, 1]), tensor([2, 3]), tensor([4])]
        """
        return list(index.split(self.micro_batch_size or max(index.numel(), 1)))

    def logits(self, model, rollout: Rollout) -> torch.Tensor:
        """`model`'s float32 logits of the rollout's completion tokens (`completion_logits`)."""
        with forward_precision(self.precision, self.device):
            return completion_logits(model, rollout, self.temperature, self.device, self.share_prompts)

    @torch.no_grad()
    def logp(self, model, rollout: Rollout) -> torch.Tensor:
        """The (B, L) log-probs of the rollout's tokens under `model` as it is now, on the CPU."""
        rollout = rollout.apply(lambda tensor: tensor.to(self.device))
        parts = []
        for index in self.micro_batches(torch.arange(rollout.completion_ids.shape[0], device=self.device)):
            part = rollout.apply(lambda tensor: tensor[index])
            parts.append(token_logp(self.logits(model, part), part.completion_ids))
        return torch.cat(parts).cpu()
