"""Does a compiled step pay back within a cell? torch.compile against eager on the learner's work.

The speed target asks for a compiled path "where it pays back within a cell's steps, compile time
included". This times the part of a step a compiler could speed up, the policy's forward and
backward over the batch (the scoring forwards are the same shapes without the backward), on the
benchmark's random tiny model at one thread:
    eager      median of --calls forward+backward passes
    compiled   torch.compile(model) (inductor, the default mode): the first call (compilation)
               and the median of the following --calls
A training step's batch has one shape only if every completion has the same length; the
sampler stops when every sequence has ended, so the completion width varies from step to step.
The benchmark therefore also times the first call at each of `--widths` other completion widths
(a recompilation each, unless dynamic shapes absorb them).

    pays back after N steps  = compile time (all widths) / saving per step
The verdict compares N with the steps of one cell of the default grid (--cell-steps, 40) and of
the study (80); a cell that ends before N has paid for the compiler and got nothing back.

    .venv/bin/python benchmarks/compile_payback.py [--size 1M] [--rows 128] [--prompt 6] [--widths 8 7 6 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from common import machine, markdown_table, median, random_tiny, verdict


def forward_backward(model, ids: torch.Tensor, completion: int) -> float:
    """One forward and backward of the mean log-prob of the last `completion` tokens; its seconds."""
    start = time.perf_counter()
    logits = model(input_ids=ids).logits[:, -completion - 1 : -1]
    logp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, -completion:, None]).mean()
    logp.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def batch(vocab: int, rows: int, prompt: int, completion: int) -> torch.Tensor:
    return torch.randint(3, vocab, (rows, prompt + completion), generator=torch.Generator().manual_seed(completion))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1M")
    parser.add_argument("--rows", type=int, default=128, help="rows per step (prompts × G)")
    parser.add_argument("--prompt", type=int, default=6, help="prompt tokens")
    parser.add_argument(
        "--widths", type=int, nargs="+", default=[8, 7, 6, 5], help="completion widths; the first is timed"
    )
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--cell-steps", type=int, nargs="+", default=[40, 80])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine())
    with tempfile.TemporaryDirectory() as scratch:
        folder = random_tiny(Path(scratch) / "model", args.size)
        eager = AutoModelForCausalLM.from_pretrained(folder).train()
        compiled_model = AutoModelForCausalLM.from_pretrained(folder).train()
    width = args.widths[0]
    ids = batch(eager.config.vocab_size, args.rows, args.prompt, width)
    forward_backward(eager, ids, width)  # warm-up
    eager_s = median([forward_backward(eager, ids, width) for _ in range(args.calls)])
    compiled = torch.compile(compiled_model)
    first_s = forward_backward(compiled, ids, width)
    compiled_s = median([forward_backward(compiled, ids, width) for _ in range(args.calls)])
    other_widths = {
        w: forward_backward(compiled, batch(eager.config.vocab_size, args.rows, args.prompt, w), w)
        for w in args.widths[1:]
    }
    compile_s = first_s - compiled_s + sum(other_widths.values()) - compiled_s * len(other_widths)
    saving = eager_s - compiled_s
    payback = compile_s / saving if saving > 0 else float("inf")
    rows = [
        ["eager forward+backward", eager_s],
        ["compiled forward+backward", compiled_s],
        [f"first compiled call (width {width})", first_s],
        *([f"first call at width {w}", s] for w, s in other_widths.items()),
        ["compile time, all widths", compile_s],
        ["saving per step", saving],
    ]
    print(markdown_table(["what", "seconds"], rows))
    print(f"pays back after {payback:.0f} steps; a cell runs {' or '.join(map(str, args.cell_steps))}")
    verdict(
        "compiled step pays back within a cell",
        f"{payback:.0f} steps to pay back, cells of {max(args.cell_steps)}",
        payback <= max(args.cell_steps),
    )


if __name__ == "__main__":
    main()
