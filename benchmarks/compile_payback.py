"""Does a compiled step pay back within a cell? torch.compile against eager on the learner's work.

The speed target asks for a compiled path "where it pays back within a cell's steps, compile time
included". This times the part of a step a compiler could speed up, the policy's forward and
backward over the batch (the scoring forwards are the same shapes without the backward), at one
thread, on the benchmark's random tiny model or on a pretrained folder (`--model`, e.g. the
SmolLM2 base that config/smollm2.yaml builds), in float32 or under bfloat16 autocast
(`--autocast`, the SmolLM2 study's precision). Only the completion's positions reach the output
layer (`logits_to_keep`), as in the trainer's scoring:
    eager      median of --calls forward+backward passes
    compiled   torch.compile(model) (inductor, the default mode): the first call (compilation)
               and the median of the following --calls
A training step's batch has one shape only if every completion has the same length; the
sampler stops when every sequence has ended, so the completion width varies from step to step.
The benchmark therefore also times the first call at each of `--widths` other completion widths
(a recompilation each, unless dynamic shapes absorb them). Inductor's compiled code is cached on
disk (TORCHINDUCTOR_CACHE_DIR, here a fresh folder); a later cell is a new process that finds it
there, so a second process times its own first calls at the first two widths against that cache.

    pays back after N steps  = compile time (all widths) / saving per step
The verdict compares N with the steps of a cell (--cell-steps: 40 and 80 for the toy grids, 20
for the SmolLM2 study); a cell that ends before N has paid for the compiler and got nothing back.

    .venv/bin/python benchmarks/compile_payback.py [--size 1M] [--rows 128] [--prompt 6] [--widths 8 7 6 5]
    .venv/bin/python benchmarks/compile_payback.py --model results/bases/smollm2-135m-<hash>/model \
        --autocast --rows 16 --prompt 136 --widths 24 23 20 17 --calls 5 --cell-steps 20
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from common import machine, markdown_table, median, random_tiny, verdict


def forward_backward(model, ids: torch.Tensor, completion: int, autocast: bool) -> float:
    """One forward and backward of the mean log-prob of the last `completion` tokens; its seconds."""
    start = time.perf_counter()
    precision = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    with precision:
        logits = model(input_ids=ids, logits_to_keep=completion + 1).logits[:, :-1]
        logp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, -completion:, None]).mean()
    logp.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def batch(vocab: int, rows: int, prompt: int, completion: int) -> torch.Tensor:
    return torch.randint(3, vocab, (rows, prompt + completion), generator=torch.Generator().manual_seed(completion))


def first_compiled_calls(folder: Path, args) -> list[float]:
    """A freshly compiled model's first call at the first two widths (the second is the one that
    recompiles for dynamic shapes): compilation and one pass each."""
    model = torch.compile(AutoModelForCausalLM.from_pretrained(folder).train())
    vocab = model.config.vocab_size
    return [
        forward_backward(model, batch(vocab, args.rows, args.prompt, width), width, args.autocast)
        for width in args.widths[:2]
    ]


def later_cell_first_calls(folder: Path, argv: list[str]) -> list[float]:
    """`first_compiled_calls` in a new process, which finds this one's compiled code on disk."""
    command = [sys.executable, __file__, *argv, "--first-calls-of", str(folder)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1M", help="the random tiny model's size, without --model")
    parser.add_argument("--model", type=Path, help="a pretrained Hugging Face folder instead of the tiny model")
    parser.add_argument("--autocast", action="store_true", help="bfloat16 autocast over float32 weights")
    parser.add_argument("--rows", type=int, default=128, help="rows per step (prompts × G)")
    parser.add_argument("--prompt", type=int, default=6, help="prompt tokens")
    parser.add_argument(
        "--widths", type=int, nargs="+", default=[8, 7, 6, 5], help="completion widths; the first is timed"
    )
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--cell-steps", type=int, nargs="+", default=[40, 80])
    parser.add_argument("--first-calls-of", type=Path, help=argparse.SUPPRESS)  # the later cell's process
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.first_calls_of:
        print(json.dumps(first_compiled_calls(args.first_calls_of, args)))
        return
    print(machine())
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(scratch) / "inductor")  # empty: the first cell's
        folder = args.model or random_tiny(Path(scratch) / "model", args.size)
        eager = AutoModelForCausalLM.from_pretrained(folder).train()
        compiled_model = AutoModelForCausalLM.from_pretrained(folder).train()
        width = args.widths[0]
        ids = batch(eager.config.vocab_size, args.rows, args.prompt, width)
        forward_backward(eager, ids, width, args.autocast)  # warm-up
        eager_s = median([forward_backward(eager, ids, width, args.autocast) for _ in range(args.calls)])
        compiled = torch.compile(compiled_model)
        first_s = forward_backward(compiled, ids, width, args.autocast)
        compiled_s = median([forward_backward(compiled, ids, width, args.autocast) for _ in range(args.calls)])
        other_widths = {
            w: forward_backward(compiled, batch(eager.config.vocab_size, args.rows, args.prompt, w), w, args.autocast)
            for w in args.widths[1:]
        }
        later_first_s = later_cell_first_calls(Path(folder), sys.argv[1:])
    compile_s = first_s - compiled_s + sum(other_widths.values()) - compiled_s * len(other_widths)
    later_compile_s = sum(later_first_s) - compiled_s * len(later_first_s)
    saving = eager_s - compiled_s
    payback = compile_s / saving if saving > 0 else float("inf")
    rows = [
        ["eager forward+backward", eager_s],
        ["compiled forward+backward", compiled_s],
        [f"first compiled call (width {width})", first_s],
        *([f"first call at width {w}", s] for w, s in other_widths.items()),
        ["compile time, all widths", compile_s],
        *(
            [f"a later cell's first call at width {w} (compiled code on disk)", s]
            for w, s in zip(args.widths, later_first_s)
        ),
        ["a later cell's compile time", later_compile_s],
        ["saving per step", saving],
    ]
    print(markdown_table(["what", "seconds"], rows))
    print(f"pays back after {payback:.0f} steps; a cell runs {' or '.join(map(str, args.cell_steps))}")
    later_payback = later_compile_s / saving if saving > 0 else float("inf")
    print(f"a later cell, its compiled code on disk, pays back after {later_payback:.0f} steps")
    verdict(
        "compiled step pays back within a cell",
        f"{payback:.0f} steps to pay back, cells of {max(args.cell_steps)}",
        payback <= max(args.cell_steps),
    )


if __name__ == "__main__":
    main()
