"""What `klrl evaluate` makes of lm-eval's results: each task's pass@1 and standard error, one
record per problem, the samples files and results.json (written last: its presence means the
evaluation is complete), with the keys of its "mechanism" (klrl.evaluation.mechanism); and the
checks made before any generation (the data's rows and files, a diverged cell's non-finite weights).
The lm-eval name of each task comes with the results (klrl.evaluation.harness names them)."""

from __future__ import annotations

import json
from pathlib import Path

from klrl import __version__
from klrl.core.files import write_atomic, write_jsonl
from klrl.core.paths import samples_file
from klrl.tasks.data import RowLimits, read_manifest, read_split

FILTER = "all-samples"  # the filter_list name in lm_eval_tasks/_template_yaml
MECHANISM_KEYS = (
    "task",
    "prompts",
    "samples",
    "beta",
    "kl_reverse",
    "kl_reverse_se",
    "kl_forward",
    "kl_forward_se",
    "entropy",
    "entropy_se",
    "reward",
    "reward_se",
    "objective",
    "objective_se",
    "seconds",
)  # results.json's "mechanism", in order (klrl.evaluation.mechanism)


def task_scores(results: dict, name: str) -> dict:
    """pass@1 and its standard error for the task lm-eval calls `name`, from its results dict."""
    metrics = results["results"][name]
    stderr = metrics[f"pass@1_stderr,{FILTER}"]
    return {
        "pass@1": metrics[f"pass@1,{FILTER}"],
        "stderr": None if stderr == "N/A" else stderr,
        "problems": results["n-samples"][name]["effective"],
    }


def sample_records(results: dict, name: str) -> list[dict]:
    """One record per problem from lm-eval's logged samples of the task it calls `name`."""
    records = []
    for sample in results["samples"][name]:
        doc = sample["doc"]
        records.append(
            {
                "id": doc["id"],
                "prompt": sample["arguments"][0][0],
                "answer": doc["answer"],
                "completions": sample["filtered_resps"][0],
                "rewards": sample["rewards"],
                "pass@1": sample["pass@1"],
            }
        )
    return records


def write_json(path: Path, value: dict) -> None:
    write_atomic(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def write_outputs(out: Path, results: dict, names: dict[str, str], data_dir: Path, record: dict) -> dict:
    """Write the samples, then results.json (the completion marker); returns what results.json
    holds. `names` maps each klrl task to its lm-eval name (`harness.lm_eval_task_name`)."""
    import lm_eval

    scores = {}
    for task, name in names.items():
        samples_file(out, task).parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(samples_file(out, task), sample_records(results, name))
        manifest = read_manifest(data_dir / task)
        scores[task] = task_scores(results, name) | {
            "samples": record["decoding"]["samples"],
            "data": str(data_dir / task / "test.jsonl"),
            "data_sha256": manifest["files"]["test.jsonl"]["sha256"],
        }
    summary = record | {"tasks": scores, "versions": {"klrl": __version__, "lm_eval": lm_eval.__version__}}
    write_json(out, summary)
    return summary


def has_non_finite_weights(model_dir: Path) -> bool:
    """Whether any weight in the folder's safetensors files is NaN or infinite (a diverged cell's)."""
    import torch
    from safetensors import safe_open

    for path in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(path), "pt") as weights:
            if any(not torch.isfinite(weights.get_tensor(name)).all() for name in weights.keys()):
                return True
    return False


def check_data(model: str, tasks: list[str], data_dir: Path, limits: RowLimits) -> None:
    """Every row of every task's test split within the limits (the prompt in the model's tokens,
    a model folder `harness.check_model` has passed) and every file as prepared (sha256): a bad
    row is named by file:line before any generation."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    for task in tasks:
        read_split(data_dir / task / "test.jsonl", None, limits, lambda text: len(tokenizer(text).input_ids))
