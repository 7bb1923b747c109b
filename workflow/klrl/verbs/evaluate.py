"""`klrl evaluate`: one model folder (a trained cell or a base model) on a list of tasks.

Writes, at the paths the workflow names (lm-eval's own tracker names files by date):
  <out>                      results.json: per task pass@1, its standard error over problems,
                             the numbers of problems and samples, the data's sha256; the decoding,
                             backend, seed, versions and the timing of each phase
  <out dir>/samples/<task>.jsonl
                             one line per problem: id, the prompt as the model saw it (chat
                             template applied), the reference answer, every completion and its reward
results.json is written last, so its presence means the evaluation is complete; `<out>.lock`
keeps a second process from evaluating into the same place at once (klrl.core.folder_lock). Every
row is checked (limits, encoding, answers, the file's sha256 against its manifest) before the
model generates anything; `grading` counts the completions the reward timed out on or zeroed
at its batch deadline (klrl.grading.verify_worker). Given the cell's
`--train-status`, it is recorded in results.json; a cell that diverged to non-finite weights is
not evaluated (results.json then says so, with no scores). With an MLflow
run id, the scores go to that run as metrics `final_eval/<task>/pass@1` (and `_stderr`; the
trainer's periodic held-out score is `periodic_eval/pass@1`) and both
files as artifacts under `eval/`.

Given the base model as `--reference`, the cell's `--beta` and its training task and decoding
(`--mechanism-task`, `--mechanism-temperature`, `--mechanism-max-new-tokens`), it first measures
the KL the model attains (klrl.evaluation.mechanism): results.json's "mechanism", and the MLflow
metrics `mechanism/<key>` of its numbers. It runs before lm-eval, so that its two models have
left the GPU when lm-eval's backend loads.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

HELP = "evaluate a model on tasks through lm-evaluation-harness (pass@1)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from klrl.evaluation.harness import (
        BACKENDS,
        BATCH_SIZE,
        MECHANISM_PROMPTS,
        MECHANISM_SAMPLES,
        VLLM_MEMORY_FRACTION,
        Decoding,
    )
    from klrl.tasks import TASKS
    from klrl.training.config import TrainConfig
    from klrl.tasks.data import MAX_ANSWER_CHARS, MAX_PROMPT_TOKENS
    from klrl.tracking.attempt_runs import add_tracking_arguments

    parser.add_argument("--model", required=True, help="model folder (a cell's train/final, a base model) or Hub id")
    parser.add_argument("--revision", help="Hub revision of --model (a branch, tag or commit)")
    parser.add_argument(
        "--stop-tokens",
        nargs="*",
        default=[],
        metavar="TOKEN",
        help="tokens that end a completion besides the EOS and the chat template's end of turn",
    )
    parser.add_argument(
        "--tasks", nargs="+", required=True, choices=sorted(TASKS), metavar="TASK", help="klrl task names"
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="folder of prepared tasks (<task>/test.jsonl)")
    parser.add_argument("--out", type=Path, required=True, help="results.json to write; samples/ goes beside it")
    parser.add_argument("--samples", type=int, default=Decoding.samples, help="n completions per problem for pass@1")
    parser.add_argument("--greedy", action="store_true", help="one greedy completion per problem instead")
    parser.add_argument(
        "--temperature", type=float, default=Decoding.temperature, help="sampling temperature (the paper's: 1.0)"
    )
    parser.add_argument("--top-p", type=float, default=Decoding.top_p, help="nucleus mass (the paper's: 1.0)")
    parser.add_argument("--max-new-tokens", type=int, default=Decoding.max_new_tokens, help="completion length limit")
    parser.add_argument("--backend", choices=BACKENDS, default=BACKENDS[0], help="hf (CPU or GPU) or vllm (GPU)")
    parser.add_argument(
        "--device", default="cpu", help="cpu, cuda, cuda:0 ... (vllm: cpu means its CPU build, in float32)"
    )
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="generation batch (hf backend)")
    parser.add_argument(
        "--vllm-memory-fraction",
        type=float,
        default=VLLM_MEMORY_FRACTION,
        help="GPU memory vLLM may take (vllm backend; on CPU builds: of RAM)",
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--limit", type=int, help="only the first N problems of each task")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument(
        "--max-prompt-tokens", type=int, default=MAX_PROMPT_TOKENS, help="longest prompt accepted from the data"
    )
    parser.add_argument(
        "--max-answer-chars", type=int, default=MAX_ANSWER_CHARS, help="longest reference answer accepted"
    )
    parser.add_argument("--train-status", type=Path, help="the cell's train/status.json, recorded beside the scores")
    mechanism = parser.add_argument_group("KL measurement (klrl.evaluation.mechanism; all of the first three, or none)")
    mechanism.add_argument("--reference", help="the cell's reference model πref (the base): folder or Hub id")
    mechanism.add_argument("--reference-revision", help="Hub revision of --reference")
    mechanism.add_argument("--beta", type=float, help="the cell's β, of the objective reward − β·KL(π‖πref)")
    mechanism.add_argument(
        "--mechanism-task", choices=sorted(TASKS), metavar="TASK", help="the cell's training task (its test split)"
    )
    mechanism.add_argument(
        "--mechanism-prompts", type=int, default=MECHANISM_PROMPTS, help="the first N problems of the test split"
    )
    mechanism.add_argument(
        "--mechanism-samples", type=int, default=MECHANISM_SAMPLES, help="completions per prompt from each model"
    )
    mechanism.add_argument(
        "--mechanism-temperature", type=float, default=TrainConfig.temperature, help="the training temperature"
    )
    mechanism.add_argument(
        "--mechanism-max-new-tokens", type=int, default=TrainConfig.max_new_tokens, help="the training length limit"
    )
    mechanism.add_argument(
        "--mechanism-precision",
        choices=("none", "bf16-autocast"),
        default="none",
        help="the cell's mixed_precision where it is bf16-autocast (the linear products in bfloat16); else float32",
    )
    add_tracking_arguments(parser)


def run(args: argparse.Namespace) -> None:
    from klrl.core.folder_lock import hold_lock

    with hold_lock(args.out.with_name(args.out.name + ".lock"), f"evaluation {args.out}"):
        _run(args)


def _run(args: argparse.Namespace) -> None:
    import torch

    from klrl.core.paths import SAMPLES
    from klrl.evaluation.harness import Decoding, check_model, evaluate, lm_eval_task_name
    from klrl.evaluation.results_files import check_data, has_non_finite_weights, write_json, write_outputs
    from klrl.grading.verify_worker import grading_counts
    from klrl.tasks.data import RowLimits
    from klrl.tracking.attempt_runs import tracker_from_args

    train_status = json.loads(args.train_status.read_text()) if args.train_status else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if train_status and train_status["status"] == "diverged" and has_non_finite_weights(args.model):
        write_json(
            args.out, {"model": args.model, "train_status": train_status, "tasks": {}, "skipped": "non-finite weights"}
        )
        print(f"{args.out}: not evaluated, the cell diverged to non-finite weights ({train_status['reason']})")
        return
    given = [args.reference is not None, args.beta is not None, args.mechanism_task is not None]
    if any(given) and not all(given):
        raise ValueError("--reference, --beta and --mechanism-task go together (the KL measurement needs all three)")
    if args.threads:
        torch.set_num_threads(args.threads)
    check_model(args.model)
    check_data(args.model, args.tasks, args.data_dir, RowLimits(args.max_prompt_tokens, args.max_answer_chars))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    grading_counts()  # from here on: this evaluation's
    mechanism = _measure_mechanism(args) if args.reference is not None else None
    samples = 1 if args.greedy else args.samples
    decoding = Decoding(samples, args.greedy, args.temperature, args.top_p, args.max_new_tokens)
    results, timing = evaluate(
        args.model,
        args.tasks,
        args.data_dir,
        decoding,
        backend=args.backend,
        device=args.device,
        batch_size=args.batch_size,
        seed=args.seed,
        limit=args.limit,
        vllm_memory_fraction=args.vllm_memory_fraction,
        revision=args.revision,
        stop_tokens=tuple(args.stop_tokens),
    )
    record = {
        "model": args.model,
        "train_status": train_status,
        "backend": args.backend,
        "seed": args.seed,
        "decoding": vars(decoding) | {"chat_template": True},
        "timing_s": timing,
        "grading": grading_counts(),
    } | ({"mechanism": mechanism} if mechanism else {})
    names = {task: lm_eval_task_name(task) for task in args.tasks}
    summary = write_outputs(args.out, results, names, args.data_dir, record)
    tracker = tracker_from_args(args, cell_folder=args.train_status.parent if args.train_status else None)
    metrics = {}
    for task, score in summary["tasks"].items():
        metrics[f"final_eval/{task}/pass@1"] = score["pass@1"]
        if score["stderr"] is not None:
            metrics[f"final_eval/{task}/pass@1_stderr"] = score["stderr"]
    for key, value in (mechanism or {}).items():
        if isinstance(value, (int, float)):
            metrics[f"mechanism/{key}"] = value
    tracker.log_metrics(metrics, step=0)
    tracker.log_artifact(args.out, "eval")
    tracker.log_artifact(args.out.parent / SAMPLES, "eval")
    if train_status is None:
        tracker.finish()  # a base model's run ends with its evaluation; a cell's ended with training
    for task, score in summary["tasks"].items():
        print(
            f"{task}: pass@1 {score['pass@1']:.3f} ± {score['stderr'] or 0:.3f} ({score['problems']} problems × {samples})"
        )
    print(f"{args.out}: generation {timing['generation']:.1f} s, overhead {timing['overhead']:.1f} s")
    if mechanism:
        print(
            f"{mechanism['task']}: KL(π‖πref) {mechanism['kl_reverse']:.4f}, KL(πref‖π) {mechanism['kl_forward']:.4f},"
            f" reward {mechanism['reward']:.3f}, J_β {mechanism['objective']:.4f} at β {mechanism['beta']:g}"
            f" ({mechanism['prompts']} prompts × {mechanism['samples']}, {mechanism['seconds']:.1f} s)"
        )


def _measure_mechanism(args: argparse.Namespace) -> dict:
    from klrl.evaluation.mechanism import measure_models

    return measure_models(
        args.model,
        args.reference,
        args.mechanism_task,
        args.data_dir,
        beta=args.beta,
        prompts=args.mechanism_prompts,
        samples=args.mechanism_samples,
        temperature=args.mechanism_temperature,
        max_new_tokens=args.mechanism_max_new_tokens,
        device=args.device,
        seed=args.seed,
        batch_size=args.batch_size,
        reference_revision=args.reference_revision,
        stop_tokens=tuple(args.stop_tokens),
        mixed_precision=args.mechanism_precision,
    )
