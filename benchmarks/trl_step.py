"""RL step time: klrl's Trainer against TRL's GRPOTrainer, same tiny model, same work, one thread each.

Equal work: P prompts × G samples per optimizer step, at most T new tokens (a random model
rarely samples its end token, so both generate T), temperature 1, top-p 1; K3 in the loss with
β = 0.1 (klrl: kl=k3-loss; TRL: beta with its k3 estimator), a frozen reference model, one
update per batch, AdamW, gradient-norm clipping at 1. TRL: num_generations=G,
per_device_train_batch_size = generation_batch_size = P·G (completions, one generation batch
per step), num_iterations=1, no gradient accumulation, gradient checkpointing off and bf16
off (TRL's defaults turn both on), loss_type="dr_grpo" with scale_rewards="none" (sum over tokens divided by a
constant, advantages R − group mean: the closest to klrl's seq-sum with group-mean
advantages), use_cpu, no vLLM, no eval, no logging, no saving.

Each repetition runs one process per trainer, in alternating order, each timing `--steps`
optimizer steps after `--warmup` discarded ones; the table shows medians over repetitions
and the median of the per-repetition ratio TRL / klrl. Phases:
    generate  sampling, decoding and the reward
    logprobs  the reference's and the policy's forward passes and the KL/advantage arithmetic
    backward  the loss's backward pass
    optimizer clipping, AdamW and the rest of the step (TRL: its Trainer's bookkeeping too)

    .venv/bin/python benchmarks/trl_step.py [--size 1M] [--prompts 16] [--group 8] [--new-tokens 8] [--reps 5]

At SmolLM2's shape (config/smollm2.yaml's base, task and prompt with its shots as chat turns, in
both trainers; bfloat16 autocast over float32 weights in both, with klrl's fused AdamW and TRL's
default optimizer):

    .venv/bin/python benchmarks/trl_step.py --smollm2 --bf16 --prompts 4 --group 4 --new-tokens 24 --reps 3 --steps 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, arith_data, machine, markdown_table, median, random_tiny, verdict
from smollm2_step import prepare

PHASES = ("generate", "logprobs", "backward", "optimizer")
BETA = 0.1
TARGET = 2.0  # the target: TRL step time / klrl step time


def ours(args) -> list[dict]:
    from klrl.objective.kl_config import KLConfig
    from klrl.training.config import TrainConfig
    from klrl.training.trainer import Trainer

    config = TrainConfig(
        base_model=args.model,
        train_data=f"{args.data}/train.jsonl",
        eval_data=f"{args.data}/test.jsonl",
        reward="arithmetic",
        kl=KLConfig.from_name("k3-loss", beta=BETA),
        advantage="group-mean",
        prompts_per_step=args.prompts,
        group_size=args.group,
        max_new_tokens=args.new_tokens,
        grad_clip=1.0,
        threads=1,
        mixed_precision="bf16-autocast" if args.bf16 else "none",
        fused_adamw=args.bf16,
    )
    trainer = Trainer(config, Path(args.out))
    steps = []
    for _ in range(args.warmup + args.steps):
        start = time.perf_counter()
        record = trainer.train_step()
        total = time.perf_counter() - start
        trainer.step += 1
        phases = {
            "generate": record["time/generate"],
            "logprobs": record["time/score"],
            "backward": record["time/backward"],
        }
        phases["optimizer"] = total - sum(phases.values())
        steps.append(phases | {"total": total, "tokens": record["rollout/response_length"]})
    return steps[args.warmup :]


def trl(args) -> list[dict]:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from klrl.grading.rewards import get_reward
    from klrl.tasks.data import read_split
    from klrl.training.prompts import chat_messages

    torch.set_num_threads(1)
    clock: dict[str, float] = {}

    def timed(name, method):
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return method(*a, **k)
            finally:
                clock[name] = clock.get(name, 0.0) + time.perf_counter() - start

        return wrapper

    class TimedGRPO(GRPOTrainer):
        """GRPOTrainer with its phases timed: the hooks are the methods TRL 1.16 calls once per step."""

        def _generate(self, *a, **k):
            return timed("generate", super()._generate)(*a, **k)

        def _calculate_rewards(self, *a, **k):
            return timed("rewards", super()._calculate_rewards)(*a, **k)

        def _generate_and_score_completions(self, *a, **k):
            return timed("prepare", super()._generate_and_score_completions)(*a, **k)

        def compute_loss(self, *a, **k):
            return timed("loss", super().compute_loss)(*a, **k)

        def training_step(self, *a, **k):
            return timed("training_step", super().training_step)(*a, **k)

    steps = []

    class StepClock(TrainerCallback):
        def on_step_begin(self, *_, **__):
            clock.clear()
            clock["start"] = time.perf_counter()

        def on_step_end(self, *_, **__):
            total = time.perf_counter() - clock["start"]
            generate = clock["generate"] + clock["rewards"]
            logprobs = clock["prepare"] - generate + clock["loss"]
            backward = clock["training_step"] - clock["prepare"] - clock["loss"]
            steps.append(
                {
                    "generate": generate,
                    "logprobs": logprobs,
                    "backward": backward,
                    "optimizer": total - clock["training_step"],
                    "total": total,
                }
            )

    reward_fn = get_reward("arithmetic")
    rows = read_split(Path(args.data) / "train.jsonl")
    dataset = Dataset.from_list([{"prompt": chat_messages(r), "answer": r["answer"]} for r in rows])
    batch = args.prompts * args.group
    config = GRPOConfig(
        output_dir=args.out,
        per_device_train_batch_size=batch,
        generation_batch_size=batch,
        num_generations=args.group,
        gradient_accumulation_steps=1,
        num_iterations=1,
        max_completion_length=args.new_tokens,
        temperature=1.0,
        top_p=1.0,
        beta=BETA,
        loss_type="dr_grpo",
        scale_rewards="none",
        learning_rate=1e-4,
        max_grad_norm=1.0,
        max_steps=args.warmup + args.steps,
        gradient_checkpointing=False,
        use_cpu=True,
        bf16=args.bf16,
        use_vllm=False,
        report_to=[],
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = TimedGRPO(
        model=args.model,
        reward_funcs=lambda completions, answer, **_: reward_fn([c[0]["content"] for c in completions], answer),
        args=config,
        train_dataset=dataset,
        callbacks=[StepClock()],
    )
    trainer.train()
    return steps[args.warmup :]


def worker(args) -> None:
    steps = {"ours": ours, "trl": trl}[args.worker](args)
    print("RESULT " + json.dumps({key: median([s[key] for s in steps]) for key in (*PHASES, "total")}))


def run_worker(kind: str, args, model: Path, data: Path, scratch: Path) -> dict:
    command = [
        sys.executable, __file__, "--worker", kind, "--model", str(model), "--data", str(data),
        "--out", str(scratch / kind), "--prompts", str(args.prompts), "--group", str(args.group),
        "--new-tokens", str(args.new_tokens), "--steps", str(args.steps), "--warmup", str(args.warmup),
    ] + ["--bf16"] * args.bf16  # fmt: skip
    env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    line = next((line for line in out.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{kind} worker failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(line.removeprefix("RESULT "))


def compare(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        if args.smollm2:  # config/smollm2.yaml's base and task data (its prompt: shots as chat turns)
            cell = prepare(ROOT / "config" / "smollm2.yaml")
            model, data = Path(cell["base_model"]), Path(cell["train_data"]).parent
        else:
            model, data = random_tiny(scratch / "model", args.size), arith_data(scratch / "data")
        results = {"ours": [], "trl": []}
        for rep in range(args.reps):
            for kind in ("ours", "trl") if rep % 2 == 0 else ("trl", "ours"):
                results[kind].append(run_worker(kind, args, model, data, scratch))
                print(f"rep {rep} {kind}: {results[kind][-1]['total'] * 1000:.0f} ms/step", file=sys.stderr, flush=True)
    ratios = [t["total"] / o["total"] for o, t in zip(results["ours"], results["trl"])]
    rows = [
        [name, *(median([r[key] for r in results[name]]) * 1000 for key in (*PHASES, "total"))]
        for name in ("trl", "ours")
    ]
    print(
        f"{'SmolLM2-135M-Instruct' if args.smollm2 else args.size + ' model'}, {args.prompts} prompts × {args.group} samples, "
        f"{args.new_tokens} new tokens, {'bfloat16 autocast' if args.bf16 else 'float32'}, 1 thread each"
    )
    print(f"machine: {machine()}\n")
    print(markdown_table(["trainer", *(f"{p} ms" for p in PHASES), "step ms"], rows))
    print(
        f"\nTRL / klrl step time: median {median(ratios):.2f}× over {args.reps} repetitions ({', '.join(f'{r:.2f}' for r in ratios)})"
    )
    if args.smollm2:  # at this shape the ratio is reported, not held to a target
        return
    verdict(
        f"RL step ≥ 2× TRL 1.16 GRPOTrainer at {args.new_tokens} new tokens",
        f"{median(ratios):.2f}×",
        median(ratios) >= TARGET,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="1M", choices=("1M", "6M"))
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="timed steps per process")
    parser.add_argument("--warmup", type=int, default=1, help="untimed first steps per process")
    parser.add_argument("--smollm2", action="store_true", help="config/smollm2.yaml's model, task and prompt")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast over float32 weights in both")
    parser.add_argument("--worker", choices=("ours", "trl"), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    worker(args) if args.worker else compare(args)


if __name__ == "__main__":
    main()
