"""Rollout generation behind a small interface; `hf` is the transformers backend.

A backend turns prompts (token ids) into completions: `sample(model, prompts, generator, share)`
returns a `Rollout` of the prompts in `share` (this process's rows; all by default) with
left-padded prompts and right-padded completions, the same whatever the share. Sampling uses
only the `torch.Generator` it is given, so a seed fully determines the rollout. `sync(model,
version)` comes first: a backend that holds its own copy of the weights (`vllm`, in
klrl.training.vllm_backend) takes those of optimizer step `version` from the model.

The `hf` backend runs its own KV-cache decoding loop (prefill once, then one token per step
for every unfinished sequence) with temperature and top-p; on the tiny model it is faster
than `model.generate`, and it takes the generator that `generate` does not. The prefill runs
each distinct prompt once (`prompt_cache`, which scoring uses too): the G samples of a prompt share its key/value cache,
which then lives in buffers sized for the whole completion (`PreallocatedLayer`), so that a
decoding step writes one position instead of copying the cache. Its `broadcast` hook sees each
step's sampled tokens: processes that sample the same batch in lockstep (FSDP) pass a broadcast
from rank 0, so that no floating-point difference between them can split them. They also pass
`hold_weights` (`Processes.gathered`), so that the loop does not all-gather the weights anew
for every token.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


@dataclass
class Rollout:
    prompt_ids: torch.Tensor  # (B, P) left-padded with pad_id
    prompt_mask: torch.Tensor  # (B, P) 1 on real prompt tokens
    completion_ids: torch.Tensor  # (B, L) right-padded with pad_id after the first stop token
    completion_mask: torch.Tensor  # (B, L) 1 on generated tokens, the first stop token (EOS or end of turn) included
    engine_logp: torch.Tensor | None = (
        None  # (B, L) the engine's log-probs of the completion tokens (vllm; 0 on padding)
    )

    def apply(self, fn) -> Rollout:
        """A rollout of fn(tensor) for each tensor (moving to a device, selecting rows)."""
        return Rollout(*(None if tensor is None else fn(tensor) for tensor in vars(self).values()))

    @property
    def input_ids(self) -> torch.Tensor:
        return torch.cat([self.prompt_ids, self.completion_ids], dim=1)

    @property
    def attention_mask(self) -> torch.Tensor:
        return torch.cat([self.prompt_mask, self.completion_mask], dim=1)


def left_pad(prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists as a left-padded (B, P) tensor and its mask."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt)
        mask[row, width - len(prompt) :] = 1
    return ids, mask


def position_ids(mask: torch.Tensor) -> torch.Tensor:
    """Positions that start at 0 at each sequence's first real token (left padding)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def next_token_distribution(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Probabilities after temperature scaling and nucleus (top-p) truncation, renormalised."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs >= top_p  # keep the smallest set reaching top_p
        sorted_probs = sorted_probs.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def with_cache(model, cache: DynamicCache) -> dict:
    """The keyword argument that passes `cache` to the model's forward: `cache` in the
    transformers of the main venv (5.24, where `past_key_values` is deprecated), `past_key_values`
    in the 5.19 that vLLM pins, which would take `cache` silently into **kwargs and ignore it."""
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    return {name: cache}


def prompt_cache(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, DynamicCache]:
    """Run each distinct prompt (row of ids and mask) through `model` once, on its device.

    Returns the logits at the last prompt position (B, V) and the key/value cache, both with
    one row per input row: rows that share a prompt (a group's G samples) share its forward
    pass. Gradients flow through the cache when grad is enabled.
    """
    width = prompt_ids.shape[1]
    unique, rows = torch.unique(torch.cat([prompt_ids, prompt_mask], dim=1), dim=0, return_inverse=True)
    ids, mask = unique[:, :width], unique[:, width:]
    cache = DynamicCache()
    # The last position by index, not by slice: the lm_head then sees a contiguous input, so
    # torch's matmul takes the same kernel whether or not the weights require grad (a strided
    # (U, 1, d) input is folded into one matmul only when they do not: ulp-level differences).
    last = torch.tensor([width - 1], device=ids.device)
    out = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=position_ids(mask),
        logits_to_keep=last,
        **with_cache(model, cache),
    )
    cache.batch_select_indices(rows)
    return out.logits[rows, -1], cache


class PreallocatedLayer(DynamicLayer):
    """A cache layer whose keys and values sit in buffers of `capacity` positions: `update` writes
    the new positions in place and returns views, where DynamicLayer copies the whole cache
    (torch.cat) at every step, which dominates decoding on a small model. Kept over transformers'
    StaticCache: swapped in here it was slower (8 new tokens at batch 128: 194 against 134 ms), and
    `generate` gains nothing from it either (benchmarks/sampling.py times both)."""

    def __init__(self, layer: DynamicLayer, capacity: int) -> None:
        super().__init__()
        self.device, self.is_initialized = layer.device, True
        batch, heads, self.length, dim = layer.keys.shape
        self._keys = layer.keys.new_empty(batch, heads, capacity, dim)
        self._values = layer.values.new_empty(batch, heads, capacity, dim)
        self._keys[:, :, : self.length] = layer.keys
        self._values[:, :, : self.length] = layer.values
        self.keys, self.values = layer.keys, layer.values

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        end = self.length + key_states.shape[-2]
        self._keys[:, :, self.length : end] = key_states
        self._values[:, :, self.length : end] = value_states
        self.length = end
        self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
        return self.keys, self.values


@dataclass
class HFSampler:
    """KV-cache sampling with a transformers causal LM, on whatever device the model is."""

    stop_ids: tuple[int, ...]  # EOS and end-of-turn tokens (prompts.stop_token_ids)
    pad_id: int
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    broadcast: Callable[[torch.Tensor], torch.Tensor] | None = None  # applied to each step's sampled tokens
    hold_weights: Callable[[torch.nn.Module], AbstractContextManager] = nullcontext  # around the decoding loop

    def sync(self, model, version: int) -> None:
        """Nothing to do: this backend samples from the model object it is given."""

    def close(self) -> None:
        """Nothing to release: this backend holds no engine of its own."""

    @torch.no_grad()
    def sample(
        self, model, prompts: list[list[int]], generator: torch.Generator | None, share: slice = slice(None)
    ) -> Rollout:
        """Completions of every prompt (processes in lockstep sample them all); the rollout of the
        rows of `share`."""
        with self.hold_weights(model):
            tokens, prompt_ids, prompt_mask = self.decode(model, prompts, generator)
        return Rollout(prompt_ids, prompt_mask, tokens, completion_mask(tokens, self.stop_ids)).apply(
            lambda tensor: tensor[share]
        )

    def decode(self, model, prompts: list[list[int]], generator: torch.Generator | None) -> tuple[torch.Tensor, ...]:
        """The (B, L) completion tokens of the prompts (on the CPU), their left-padded ids and mask."""
        device = next(model.parameters()).device
        prompt_ids, prompt_mask = left_pad(prompts, self.pad_id)
        logits, cache = prompt_cache(model, prompt_ids.to(device), prompt_mask.to(device))
        width = prompt_ids.shape[1]
        cache.layers = [PreallocatedLayer(layer, width + self.max_new_tokens) for layer in cache.layers]
        batch = len(prompts)
        full_mask = torch.cat(
            [prompt_mask.to(device), prompt_mask.new_ones(batch, self.max_new_tokens, device=device)], dim=1
        )
        tokens = torch.full((batch, self.max_new_tokens), self.pad_id, dtype=torch.long, device=device)
        done = torch.zeros(batch, dtype=torch.bool, device=device)
        positions = prompt_mask.to(device).sum(-1, keepdim=True)
        length = self.max_new_tokens
        stops = torch.tensor(self.stop_ids, device=device)
        cached = with_cache(model, cache)
        for step in range(self.max_new_tokens):
            if self.temperature == 0:
                token = logits.argmax(-1)
            else:
                probs = next_token_distribution(logits, self.temperature, self.top_p)
                token = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(-1).to(device)
            if self.broadcast is not None:
                token = self.broadcast(token)
            token = token.masked_fill(done, self.pad_id)
            tokens[:, step] = token
            done |= torch.isin(token, stops)
            if bool(done.all()) or step == self.max_new_tokens - 1:
                length = step + 1
                break
            mask = full_mask[:, : width + step + 1]
            logits = model(
                input_ids=token[:, None], attention_mask=mask, position_ids=positions + step, **cached
            ).logits[:, -1]
        return tokens[:, :length].cpu(), prompt_ids, prompt_mask


def completion_mask(tokens: torch.Tensor, stop_ids: tuple[int, ...]) -> torch.Tensor:
    """1 on every token up to and including the first stop token (all of them if there is none)."""
    stop = torch.isin(tokens, torch.tensor(stop_ids, device=tokens.device)).long()
    return (stop.cumsum(-1) - stop == 0).long()


def completion_texts(tokenizer, rollout: Rollout) -> list[str]:
    """Each completion decoded without special tokens (what rewards read)."""
    rows = zip(rollout.completion_ids, rollout.completion_mask.bool())
    return [tokenizer.decode(ids[keep].tolist(), skip_special_tokens=True) for ids, keep in rows]
