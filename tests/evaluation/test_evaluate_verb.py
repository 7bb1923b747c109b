"""klrl.verbs.evaluate (`klrl evaluate`): results.json and the samples, MLflow, a row named before any model loads, a diverged cell recorded."""

import json
import math
import subprocess
import sys
from argparse import ArgumentParser, Namespace

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.evaluation.harness import Decoding, evaluate
from klrl.evaluation.results_files import MECHANISM_KEYS
from klrl.grading.rewards import arithmetic_reward
from klrl.tasks.data import prepare, read_split

from conftest import records


@pytest.mark.slow
def test_evaluate_command_writes_scores_and_per_sample_logs(tiny_base, eval_data, tmp_path):
    out = tmp_path / "base" / "tiny" / "eval" / "results.json"
    command = [sys.executable, "-m", "klrl", "evaluate", "--model", str(tiny_base), "--tasks", "arith", "arith-long"]
    command += [
        "--data-dir",
        str(eval_data),
        "--out",
        str(out),
        "--samples",
        "3",
        "--max-new-tokens",
        "6",
        "--threads",
        "1",
    ]
    command += [
        "--reference",
        str(tiny_base),
        "--beta",
        "0.25",
        "--mechanism-task",
        "arith",
        "--mechanism-prompts",
        "5",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["decoding"] == {
        "samples": 3,
        "greedy": False,
        "temperature": 1.0,
        "top_p": 1.0,
        "max_new_tokens": 6,
        "chat_template": True,
    }
    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    for task in ("arith", "arith-long"):
        logged = records(out.parent / "samples" / f"{task}.jsonl")
        rows = read_split(eval_data / task / "test.jsonl")
        assert [r["id"] for r in logged] == [row["id"] for row in rows]
        for record, row in zip(logged, rows):
            assert len(record["completions"]) == 3
            assert record["rewards"] == arithmetic_reward(record["completions"], [row["answer"]] * 3)
            assert record["prompt"] == tokenizer.apply_chat_template(
                [{"role": "user", "content": row["prompt"]}], add_generation_prompt=True, tokenize=False
            )
        per_problem = [sum(r["rewards"]) / 3 for r in logged]
        mean = sum(per_problem) / len(per_problem)
        stderr = math.sqrt(sum((p - mean) ** 2 for p in per_problem) / (len(per_problem) - 1) / len(per_problem))
        score = summary["tasks"][task]
        assert score["pass@1"] == pytest.approx(mean, abs=1e-12)
        assert score["stderr"] == pytest.approx(stderr, abs=1e-12)
        assert (score["problems"], score["samples"]) == (12, 3)
    assert summary["timing_s"]["overhead"] == pytest.approx(
        summary["timing_s"]["total"] - summary["timing_s"]["generation"]
    )
    mechanism = summary["mechanism"]  # the model against itself: no divergence, exactly
    assert list(mechanism) == list(MECHANISM_KEYS)
    assert (mechanism["task"], mechanism["prompts"], mechanism["samples"], mechanism["beta"]) == ("arith", 5, 4, 0.25)
    assert mechanism["kl_reverse"] == mechanism["kl_forward"] == mechanism["kl_reverse_se"] == 0
    assert mechanism["objective"] == mechanism["reward"] and mechanism["entropy"] > 0 and mechanism["seconds"] > 0


def test_a_malformed_dataset_row_is_named_before_any_model_loads(tiny_base, eval_data, tmp_path):
    bad = tmp_path / "data"
    prepare("arith", bad / "arith", seed=0, sizes={"train": 4, "test": 4})
    lines = (bad / "arith" / "test.jsonl").read_text().splitlines()
    lines[2] = lines[2].replace('"answer"', '"answr"')
    (bad / "arith" / "test.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"test\.jsonl:3: field 'answer'"):
        evaluate(str(tiny_base), ["arith"], bad, Decoding(samples=1))


@pytest.mark.slow
def test_scores_and_files_reach_the_cells_mlflow_run(tiny_base, talkative_base, eval_data, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from klrl.verbs.evaluate import add_arguments, run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = MlflowClient()
    mlflow_run = client.create_run(
        client.create_experiment("test", artifact_location=(tmp_path / "artifacts").as_uri())
    )
    out = tmp_path / "eval" / "results.json"
    parser = ArgumentParser()
    add_arguments(parser)  # the verb's own parser: its defaults for every option not given here
    args = parser.parse_args(
        ["--model", str(tiny_base), "--tasks", "arith", "--data-dir", str(eval_data), "--out", str(out), "--samples", "2",
         "--max-new-tokens", "4", "--mlflow-run-id", mlflow_run.info.run_id, "--reference", str(talkative_base),
         "--beta", "0.5", "--mechanism-task", "arith-long", "--mechanism-prompts", "3", "--mechanism-samples", "2"]
    )  # fmt: skip
    run(args)
    metrics = client.get_run(mlflow_run.info.run_id).data.metrics
    summary = json.loads(out.read_text())
    assert metrics["final_eval/arith/pass_at_1"] == summary["tasks"]["arith"]["pass@1"]
    mechanism = summary["mechanism"]
    assert mechanism["task"] == "arith-long" and mechanism["kl_reverse"] > 0 and mechanism["kl_forward"] > 0
    assert {key: metrics[f"mechanism/{key}"] for key in MECHANISM_KEYS if key != "task"} == pytest.approx(
        {key: value for key, value in mechanism.items() if key != "task"}, rel=1e-12
    )
    artifacts = {a.path for a in client.list_artifacts(mlflow_run.info.run_id, "eval")}
    assert artifacts == {"eval/results.json", "eval/samples"}


def test_a_cell_that_diverged_to_nan_weights_is_recorded_not_evaluated(tiny_base, eval_data, tmp_path):
    from klrl.verbs.evaluate import run

    model = AutoModelForCausalLM.from_pretrained(tiny_base)
    model.lm_head.weight.data[0, 0] = float("nan")
    model.save_pretrained(tmp_path / "final")
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"status": "diverged", "step": 3, "reason": "non-finite loss or gradient at step 3"}))
    out = tmp_path / "eval" / "results.json"
    args = Namespace(model=str(tmp_path / "final"), train_status=status, out=out)
    run(args)
    summary = json.loads(out.read_text())
    assert summary["tasks"] == {}
    assert summary["train_status"]["status"] == "diverged"
    assert summary["skipped"] == "non-finite weights"


def test_the_kl_measurement_needs_its_reference_beta_and_task_together(tiny_base, eval_data, tmp_path):
    from klrl.verbs.evaluate import add_arguments, run

    parser = ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["--model", str(tiny_base), "--tasks", "arith", "--data-dir", str(eval_data), "--out",
         str(tmp_path / "results.json"), "--reference", str(tiny_base), "--mechanism-task", "arith"]
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"^--reference, --beta and --mechanism-task go together"):
        run(args)


def test_under_bf16_autocast_the_kl_is_measured_on_bfloat16_products(tiny_base, talkative_base, eval_data):
    """A cell trained under bf16-autocast is measured as it trained: equal models still at exactly
    zero, two different ones at a KL other than float32's (the products really in bfloat16)."""
    from klrl.evaluation.mechanism import measure_models

    settings = dict(beta=0.5, prompts=4, samples=2, temperature=1.0, max_new_tokens=4)
    same = measure_models(
        str(tiny_base), str(tiny_base), "arith", eval_data, mixed_precision="bf16-autocast", **settings
    )
    assert same["kl_reverse"] == same["kl_forward"] == 0 and same["entropy"] > 0
    full, autocast = (
        measure_models(str(talkative_base), str(tiny_base), "arith", eval_data, mixed_precision=precision, **settings)
        for precision in ("none", "bf16-autocast")
    )
    assert math.isfinite(autocast["kl_reverse"]) and autocast["kl_reverse"] > 0
    assert autocast["kl_reverse"] != full["kl_reverse"] and autocast["kl_forward"] != full["kl_forward"]
