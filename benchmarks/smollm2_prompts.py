"""Which task and prompt make SmolLM2-135M-Instruct competent but noisy: its base pass@1 under each.

A study measures nothing when its base never earns reward: with the paper's MATH instruction
SmolLM2-135M-Instruct answers in words or copies the instruction's example `\\boxed{12}`. This
prints the base's pass@1 on the held-out split, at temperature 1 (the training and evaluation
distribution) and greedy, for each prompt tried, through the project's own path: `prepare`
writes the rows (instruction and shots as a config gives them) and lm-eval grades them with the
trainer's reward (`klrl.evaluation.harness.evaluate`). The chosen prompt is config/smollm2.yaml's.

    .venv/bin/python benchmarks/smollm2_prompts.py [--problems 60] [--samples 2] [--model FOLDER]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import yaml

from common import machine, markdown_table
from klrl.evaluation.harness import Decoding, evaluate, lm_eval_task_name
from klrl.models.smollm2 import convert_smollm2
from klrl.tasks import MATH_INSTRUCTION
from klrl.tasks.data import prepare

ROOT = Path(__file__).resolve().parents[1]
CHOSEN = yaml.safe_load((ROOT / "config" / "smollm2.yaml").read_text())["data"]["arith-spoken"]
BOX = CHOSEN["instruction"]
SYMBOLIC_SHOTS = [
    {"user": "3+4" + BOX, "assistant": "3+4 = 7. \\boxed{7}"},
    {"user": "25-3" + BOX, "assistant": "25-3 = 22. \\boxed{22}"},
]

# (label, task, instruction, shots): the paper's prompt, then each change alone, then together.
PROMPTS = [
    ("paper's MATH instruction, zero-shot", "arith", MATH_INSTRUCTION, []),
    ("short box instruction, zero-shot", "arith", BOX, []),
    ("asked in words, zero-shot", "arith-spoken", BOX, []),
    ("symbolic, 2 shots", "arith", BOX, SYMBOLIC_SHOTS),
    ("asked in words, 2 shots (chosen)", "arith-spoken", BOX, CHOSEN["shots"]),
    ("asked in words, 2 shots (chosen)", "arith-long-spoken", BOX, CHOSEN["shots"]),
    ("word problems, 2 shots (chosen)", "arith-word", BOX, CHOSEN["shots"]),
]


def pass_at_1(model: Path, data: Path, task: str, decoding: Decoding, limit: int) -> float:
    results, _ = evaluate(str(model), [task], data, decoding, batch_size=limit, limit=limit)
    return results["results"][lm_eval_task_name(task)]["pass@1,all-samples"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=60, help="held-out problems per prompt")
    parser.add_argument("--samples", type=int, default=2, help="samples per problem at temperature 1")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--model", type=Path, help="a converted SmolLM2 folder (default: converted here)")
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or convert_smollm2(Path(tmp) / "model")
        rows = []
        for i, (label, task, instruction, shots) in enumerate(PROMPTS):
            data = Path(tmp) / f"data-{i}"
            prepare(
                task,
                data / task,
                seed=0,
                sizes={"train": 8, "test": args.problems},
                instruction=instruction,
                shots=shots,
            )
            began = time.perf_counter()
            sampled = pass_at_1(
                model, data, task, Decoding(samples=args.samples, max_new_tokens=args.max_new_tokens), args.problems
            )
            greedy = pass_at_1(
                model, data, task, Decoding(samples=1, greedy=True, max_new_tokens=args.max_new_tokens), args.problems
            )
            rows.append([label, task, f"{sampled:.3f}", f"{greedy:.3f}", f"{time.perf_counter() - began:.0f}"])
            print(" | ".join(rows[-1]), flush=True)
    header = ["prompt", "task", f"pass@1, T = 1 ({args.samples} samples)", "pass@1, greedy", "seconds"]
    print(f"\nSmolLM2-135M-Instruct base, {args.problems} held-out problems, {args.max_new_tokens} new tokens")
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
