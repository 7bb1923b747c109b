"""Sampling throughput: klrl's HFSampler against `model.generate`, and the arithmetic limit.

Same random tiny model, same prompts (arith, each repeated G = 8 times as in training), same
batch and max_new_tokens, temperature 1, top-p 1, one thread. Both generate every token:
the sampler is given an end token that never occurs and `generate` gets
min_new_tokens = max_new_tokens, so the work is B × max_new_tokens tokens for both. Runs are
interleaved; medians over repetitions.

The arithmetic limit counts the multiply-adds of one generated token at context length c
(prompt + tokens so far), d the width, L the layers, V the vocabulary, N the non-embedding
parameters:
    FLOPs/token = 2·N + 2·V·d (the output projection) + 4·L·c·d (attention scores and values)
averaged over the decoding steps (the prompt's prefill is left out: it is the same for every
token count), divided by the float32 matmul rate measured here at one thread on the decode
step's own shapes ((B, d)·(d, d), (B, d)·(d, I), (B, I)·(I, d), (B, d)·(d, V)).

    .venv/bin/python benchmarks/sampling.py [--batches 16 128] [--new-tokens 32] [--reps 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from common import arith_data, machine, markdown_table, median, non_embedding_params, random_tiny, verdict
from klrl.tasks.data import read_split
from klrl.training.prompts import encode_prompts
from klrl.training.sampling import HFSampler, left_pad

GROUP = 8
TARGET = 2.0  # the target: HFSampler tokens/s over model.generate's, at the largest batch


def matmul_rate(shapes: list[tuple[int, int, int]], repeats: int = 50) -> float:
    """FLOP/s of float32 torch.matmul over the given (M, K, N) shapes, best of 5 rounds."""
    pairs = [(torch.randn(m, k), torch.randn(k, n)) for m, k, n in shapes]
    flops = sum(2 * m * k * n for m, k, n in shapes) * repeats
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            for a, b in pairs:
                torch.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return flops / best


def flops_per_token(model, context: float) -> float:
    config = model.config
    d, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
    return 2 * non_embedding_params(model) + 2 * vocab * d + 4 * layers * context * d


def time_ours(model, prompts, new_tokens: int, pad_id: int) -> float:
    sampler = HFSampler(stop_ids=(-1,), pad_id=pad_id, max_new_tokens=new_tokens)
    start = time.perf_counter()
    sampler.sample(model, prompts, torch.Generator().manual_seed(0))
    return time.perf_counter() - start


def time_generate(model, prompts, new_tokens: int, pad_id: int, cache: str | None = None) -> float:
    """`model.generate` with its default (dynamic) KV cache, or `cache="static"`: transformers'
    StaticCache, the library's preallocated alternative to klrl's PreallocatedLayer."""
    ids, mask = left_pad(prompts, pad_id)
    start = time.perf_counter()
    with torch.no_grad():
        model.generate(
            input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
            max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=pad_id, cache_implementation=cache,
        )  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="1M", choices=("1M", "6M"))
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = random_tiny(Path(tmp) / "model", args.size)
        rows = read_split(arith_data(Path(tmp) / "data") / "train.jsonl")
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    config, pad = model.config, tokenizer.pad_token_id
    table = []
    for batch in args.batches:
        prompts = encode_prompts(tokenizer, [row for row in rows[: batch // GROUP] for _ in range(GROUP)])
        times = {"klrl HFSampler": [], "model.generate": [], "model.generate, StaticCache": []}
        for _ in range(args.reps):
            times["klrl HFSampler"].append(time_ours(model, prompts, args.new_tokens, pad))
            times["model.generate"].append(time_generate(model, prompts, args.new_tokens, pad))
            times["model.generate, StaticCache"].append(time_generate(model, prompts, args.new_tokens, pad, "static"))
        d, inter = config.hidden_size, config.intermediate_size
        rate = matmul_rate([(batch, d, d), (batch, d, inter), (batch, inter, d), (batch, d, config.vocab_size)])
        context = max(len(p) for p in prompts) + (args.new_tokens + 1) / 2
        limit = rate / flops_per_token(model, context)
        for name, values in times.items():
            tokens_per_s = batch * args.new_tokens / median(values)
            table.append(
                [batch, name, tokens_per_s, median(values) * 1000 / args.new_tokens, limit, 100 * tokens_per_s / limit]
            )
        table.append([batch, "arithmetic limit", limit, batch * 1000 / limit, limit, 100.0])
        print(
            f"batch {batch}: matmul rate {rate / 1e9:.1f} GFLOP/s, {flops_per_token(model, context) / 1e6:.2f} MFLOP/token",
            flush=True,
        )
    print(
        f"\n{args.size} model ({non_embedding_params(model) / 1e6:.2f}M non-embedding parameters), {args.new_tokens} new tokens, 1 thread"
    )
    print(f"machine: {machine()}\n")
    print(markdown_table(["batch", "sampler", "tokens/s", "ms per token step", "limit tokens/s", "% of limit"], table))
    speedup = median(times["model.generate"]) / median(times["klrl HFSampler"])
    verdict(f"sampling ≥ 2× model.generate at batch {batch}", f"{speedup:.2f}×", speedup >= TARGET)


if __name__ == "__main__":
    main()
