"""How far a decoding step of the tiny model can drop below HFSampler's, and what stops it.

The sampling target is 2× `model.generate` at batch 128. This times, interleaved, one
token step (temperature 1, top-p 1, every row generating every token, one thread) of:
  - klrl's HFSampler (transformers' Llama forward over a preallocated KV cache);
  - `model.generate` with its default cache;
  - a minimal hand-written step on the same weights and the same cache: q/k/v and gate/up each
    one matmul, torch's fused RMSNorm, attention as two batched matmuls, the same sampling.
Before timing, the minimal step's logits are checked against the model's own forward. Its CPU
time (torch.profiler) is split into matmuls, attention and the rest, and set against the 2×
budget (half of `generate`'s step). The minimal step is not used by the trainer: it shows what
is left of the step once transformers' per-op overhead is gone.

    .venv/bin/python benchmarks/decode_floor.py [--batch 128] [--new-tokens 32] [--reps 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import profile
from transformers import AutoModelForCausalLM, AutoTokenizer

from common import arith_data, machine, markdown_table, median, random_tiny
from klrl.tasks.data import read_split
from klrl.training.prompts import encode_prompts
from klrl.training.sampling import PreallocatedLayer, left_pad, next_token_distribution, position_ids, prompt_cache
from sampling import GROUP, time_generate, time_ours

MATMULS = {"aten::mm", "aten::addmm"}
ATTENTION = {"aten::bmm", "aten::_softmax"}


class MinimalDecoder:
    """The fewest torch ops per token for a Llama without biases (the tiny model), reading the
    weights of `model` and appending keys and values to the preallocated cache `layers`."""

    def __init__(self, model, layers: list[PreallocatedLayer], attend: torch.Tensor) -> None:
        config, inner = model.config, model.model
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.embed, self.norm = inner.embed_tokens.weight, inner.norm.weight
        self.head = model.lm_head.weight.t().contiguous()
        self.inv_freq, self.scaling = inner.rotary_emb.inv_freq.float(), inner.rotary_emb.attention_scaling
        self.weights = [
            (
                layer.input_layernorm.weight,
                torch.cat([layer.self_attn.q_proj.weight, layer.self_attn.k_proj.weight, layer.self_attn.v_proj.weight])
                .t()
                .contiguous(),
                layer.self_attn.o_proj.weight.t().contiguous(),
                layer.post_attention_layernorm.weight,
                torch.cat([layer.mlp.gate_proj.weight, layer.mlp.up_proj.weight]).t().contiguous(),
                layer.mlp.down_proj.weight.t().contiguous(),
            )
            for layer in inner.layers
        ]
        self.cache = layers
        self.bias = torch.zeros(attend.shape).masked_fill(attend == 0, float("-inf"))[:, None, None]

    def logits(self, token: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """(B, V) logits after `token` (B,) at `positions` (B, 1)."""
        rows, heads, kv_heads, dim = token.shape[0], self.heads, self.kv_heads, self.head_dim
        half, qk_width = dim // 2, (heads + kv_heads) * dim
        freqs = positions.float() * self.inv_freq
        angles = torch.cat((freqs, freqs), -1)[:, None]
        cos, sin = angles.cos() * self.scaling, angles.sin() * self.scaling
        bias = self.bias[..., : self.cache[0].length + 1]
        x = self.embed[token]
        for (norm_in, qkv_weight, out_weight, norm_mid, gate_up_weight, down_weight), layer in zip(
            self.weights, self.cache
        ):
            qkv = F.rms_norm(x, x.shape[-1:], norm_in, self.eps) @ qkv_weight
            qk = qkv[:, :qk_width].view(rows, heads + kv_heads, dim)
            qk = qk * cos + torch.cat((-qk[..., half:], qk[..., :half]), -1) * sin
            keys, values = layer.update(qk[:, heads:, None], qkv[:, qk_width:].view(rows, kv_heads, 1, dim))
            query = qk[:, :heads].view(rows, kv_heads, heads // kv_heads, dim)
            scores = query @ keys.transpose(-1, -2) * dim**-0.5 + bias
            attended = torch.softmax(scores, -1) @ values
            x = x + attended.reshape(rows, heads * dim) @ out_weight
            gate_up = F.rms_norm(x, x.shape[-1:], norm_mid, self.eps) @ gate_up_weight
            gate, up = gate_up.chunk(2, -1)
            x = x + (F.silu(gate) * up) @ down_weight
        return F.rms_norm(x, x.shape[-1:], self.norm, self.eps) @ self.head


@torch.no_grad()
def minimal_decode(model, prompts, new_tokens: int, pad_id: int) -> tuple[float, torch.Tensor, torch.Tensor]:
    """Seconds of the minimal decoding loop after the prefill (HFSampler's own), the (B, L)
    tokens drawn and the (B, L, V) logits after each."""
    ids, mask = left_pad(prompts, pad_id)
    logits, cache = prompt_cache(model, ids, mask)
    cache.layers = [PreallocatedLayer(layer, ids.shape[1] + new_tokens) for layer in cache.layers]
    attend = torch.cat([mask, mask.new_ones(len(prompts), new_tokens)], 1)
    decoder, positions = MinimalDecoder(model, cache.layers, attend), mask.sum(-1, keepdim=True)
    generator, tokens, after = torch.Generator().manual_seed(0), [], []
    start = time.perf_counter()
    for step in range(new_tokens):
        tokens.append(torch.multinomial(next_token_distribution(logits, 1.0, 1.0), 1, generator=generator).squeeze(-1))
        logits = decoder.logits(tokens[-1], positions + step)
        after.append(logits)
    return time.perf_counter() - start, torch.stack(tokens, 1), torch.stack(after, 1)


@torch.no_grad()
def largest_gap(model, prompts, new_tokens: int, pad_id: int) -> float:
    """The largest |logit| difference between the minimal loop and the model's forward over each
    whole sequence, without a cache."""
    _, tokens, logits = minimal_decode(model, prompts, new_tokens, pad_id)
    ids, mask = left_pad(prompts, pad_id)
    mask = torch.cat([mask, torch.ones_like(tokens)], 1)
    theirs = model(input_ids=torch.cat([ids, tokens], 1), attention_mask=mask, position_ids=position_ids(mask)).logits
    return (theirs[:, ids.shape[1] :] - logits).abs().max().item()


def split(model, prompts, new_tokens: int, pad_id: int) -> dict[str, float]:
    """The minimal loop's CPU milliseconds per token step: matmuls, attention, the rest."""
    with profile() as profiler:
        minimal_decode(model, prompts, new_tokens, pad_id)
    parts = dict.fromkeys(("matmuls", "attention", "the rest"), 0.0)
    for event in profiler.key_averages():
        part = "matmuls" if event.key in MATMULS else "attention" if event.key in ATTENTION else "the rest"
        parts[part] += event.self_cpu_time_total / 1000 / new_tokens
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = random_tiny(Path(tmp) / "model", "1M")
        rows = read_split(arith_data(Path(tmp) / "data") / "train.jsonl")
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    pad, steps = tokenizer.pad_token_id, args.new_tokens
    prompts = encode_prompts(tokenizer, [row for row in rows[: args.batch // GROUP] for _ in range(GROUP)])
    gap = largest_gap(model, prompts, steps, pad)
    times = {"klrl HFSampler": [], "model.generate": [], "minimal step (decoding only)": []}
    for _ in range(args.reps):
        times["klrl HFSampler"].append(time_ours(model, prompts, steps, pad))
        times["model.generate"].append(time_generate(model, prompts, steps, pad))
        times["minimal step (decoding only)"].append(minimal_decode(model, prompts, steps, pad)[0])
    generate_s = median(times["model.generate"])
    table = [[name, median(values) * 1000 / steps, generate_s / median(values)] for name, values in times.items()]
    parts = split(model, prompts, steps, pad)
    print(f"batch {args.batch}, {steps} new tokens, 1 thread; machine: {machine()}")
    print(f"minimal step against the model's forward: max |Δ logit| {gap:.2e}\n")
    print(markdown_table(["sampler", "ms per token step", "× generate"], table))
    print(f"\n2× generate's budget: {generate_s * 1000 / steps / 2:.2f} ms per token step; the minimal step's CPU time: "
          + ", ".join(f"{name} {ms:.2f} ms" for name, ms in parts.items()))  # fmt: skip


if __name__ == "__main__":
    main()
