"""Does lm-eval's pass@1 agree with the trainer's periodic evaluation, and what does lm-eval cost?

Scores one model on the first N problems of a prepared split twice, at temperature 1 with n
samples per problem: with the trainer's own evaluation (`klrl.training.periodic_eval.problem_pass_at_1`, the
number a cell's metrics.jsonl logs) and through `klrl evaluate`'s lm-eval path. Both are
unbiased estimates of the same pass@1, from independent samples, so their per-problem
difference has mean 0; the script prints both scores, the paired standard error of the
difference and its z-score, then lm-eval's time split (generation against overhead).

    .venv/bin/python benchmarks/eval_agreement.py --model results/bases/tiny-<hash>/model \
        --data-dir results/default/data --task arith --problems 250 --samples 8
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.evaluation.harness import Decoding, evaluate, lm_eval_task_name
from klrl.grading.rewards import get_reward
from klrl.tasks.data import read_manifest, read_split
from klrl.training.periodic_eval import problem_pass_at_1
from klrl.training.sampling import HFSampler


def trainer_scores(
    model_dir: str, rows: list[dict], reward: str, samples: int, max_new_tokens: int, seed: int
) -> list[float]:
    """Per-problem pass@1 through the trainer's periodic evaluation (`problem_pass_at_1`)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    sampler = HFSampler((tokenizer.eos_token_id,), tokenizer.pad_token_id, max_new_tokens)
    generator = torch.Generator().manual_seed(seed)
    return problem_pass_at_1(model, tokenizer, sampler, rows, get_reward(reward), samples, generator)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--task", default="arith")
    parser.add_argument("--problems", type=int, default=250)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    rows = read_split(args.data_dir / args.task / "test.jsonl")[: args.problems]
    reward = read_manifest(args.data_dir / args.task)["reward"]
    start = time.perf_counter()
    ours = trainer_scores(args.model, rows, reward, args.samples, args.max_new_tokens, args.seed)
    ours_seconds = time.perf_counter() - start
    decoding = Decoding(samples=args.samples, max_new_tokens=args.max_new_tokens)
    results, timing = evaluate(args.model, [args.task], args.data_dir, decoding, seed=args.seed, limit=args.problems)
    logged = sorted(results["samples"][lm_eval_task_name(args.task)], key=lambda sample: sample["doc_id"])
    theirs = [sample["pass@1"] for sample in logged]

    diffs = [a - b for a, b in zip(ours, theirs)]
    mean_diff = sum(diffs) / len(diffs)
    se = math.sqrt(sum((d - mean_diff) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))
    print(f"{args.task}: {len(rows)} problems × {args.samples} samples, temperature 1.0, top-p 1.0")
    print(f"  trainer's evaluation  pass@1 {sum(ours) / len(ours):.4f}  ({ours_seconds:.1f} s)")
    print(f"  lm-eval               pass@1 {sum(theirs) / len(theirs):.4f}")
    print(f"  difference {mean_diff:+.4f} ± {se:.4f} (paired s.e.), z = {mean_diff / se if se else 0.0:+.2f}")
    print("lm-eval time (s): " + ", ".join(f"{key} {value:.2f}" for key, value in timing.items()))


if __name__ == "__main__":
    main()
