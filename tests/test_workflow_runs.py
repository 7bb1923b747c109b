"""The workflow run for real: .test/config/test.yaml end to end with MLflow (REST API and the UI in
headless Chromium), re-runs of one cell and of the tables, two configs in one checkout, a Hub
model declared in a config, and the SmolLM2 study in miniature (the paper's grid in miniature:
tests/test_paper_miniature.py)."""

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import yaml
from klrl.grid.expansion import expand_grid, parse_cell_id
from klrl.core.provenance import source_commit
from klrl.reports.mlflow_screenshots import CHROMIUM, capture
from workflow_helpers import FIGURES, ROOT, copy_workflow, job_counts, load_config, snakemake
from klrl.tracking.mlflow_process import mlflow_server as serve_mlflow

from conftest import records


# ------------------------------------------------------------------------- end to end


CI_CELLS = ("tiny__k1-reward__b0.1__on__s0", "tiny__k3-loss__b0.1__off__s0")
CI_OUT = Path("results") / "ci-test"  # .test/config/test.yaml's experiment


@pytest.mark.slow
def test_the_ci_grid_runs_end_to_end(ci_run):
    scores = pd.read_csv(ci_run / CI_OUT / "tables" / "scores.csv")
    assert sorted(zip(scores["cell"], scores["task"])) == sorted(
        (c, t) for c in CI_CELLS for t in ("arith", "arith-long")
    )
    assert set(scores["status"]) == {"completed"}
    assert set(scores["step"]) == {3}
    base = json.loads((ci_run / CI_OUT / "base" / "tiny" / "eval" / "results.json").read_text())
    for _, row in scores.iterrows():
        cell = json.loads((ci_run / CI_OUT / "cells" / row["cell"] / "eval" / "results.json").read_text())
        assert row["pass@1"] == pytest.approx(cell["tasks"][row["task"]]["pass@1"])
        assert row["base_pass@1"] == pytest.approx(base["tasks"][row["task"]]["pass@1"])
        assert cell["train_status"]["status"] == "completed"
    config = yaml.safe_load((ci_run / CI_OUT / "cells" / CI_CELLS[1] / "train" / "config.yaml").read_text())
    assert (config["async_lag"], config["kl"]["name"], config["advantage"]) == (1, "k3-loss", "group-mean")
    plan = json.loads(
        (ci_run / CI_OUT / "tables" / "plan.json").read_text()
    )  # rule plan ran before the first train job
    assert (
        plan["followed"]
        and plan["fixed_before_results"]
        and [line["hash"] for line in plan["recorded"]] == [plan["hash"]]
    )
    provenance = pd.read_csv(
        ci_run / CI_OUT / "tables" / "provenance.csv", dtype={"commit": str}
    )  # a hash of digits stays text
    assert list(provenance["commit"]) == [source_commit()] and list(provenance["cells"]) == [2]
    for rule in ("train", "evaluate"):
        assert (ci_run / CI_OUT / "benchmarks" / rule / f"{CI_CELLS[0]}.tsv").is_file()
        assert (ci_run / CI_OUT / "logs" / rule / f"{CI_CELLS[0]}.log").is_file()


@pytest.mark.slow
def test_the_grid_benchmark_summarises_a_finished_run(ci_run):
    """benchmarks/grid_time.py --summarise: the critical path through the cells' jobs and a cell's
    RL steps per minute of its train job (3 steps over the job's wall seconds, median of 2 cells)."""
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "grid_time.py"),
        "--summarise",
        str(ci_run),
        "--configfile",
        ".test/config/test.yaml",
    ]
    out = subprocess.run(
        command,
        cwd=ci_run,
        capture_output=True,
        text=True,
        env=os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seconds = [
        float((ci_run / CI_OUT / "benchmarks" / "train" / f"{cell}.tsv").read_text().splitlines()[1].split("\t")[0])
        for cell in CI_CELLS
    ]
    rate = float(re.search(r"a cell's throughput: ([\d.]+) RL steps per minute", out.stdout)[1])
    assert rate == pytest.approx(sum(3 * 60 / s for s in seconds) / 2, abs=0.06)
    assert re.search(r"critical path: .*train \d+s → evaluate \d+s → aggregate", out.stdout)


@pytest.mark.slow
def test_rerunning_one_cell_reruns_only_its_jobs(ci_run):
    target = f"results/ci-test/cells/{CI_CELLS[0]}/eval/results.json"
    dry = snakemake(ci_run, "-n", "--configfile", ".test/config/test.yaml", "--forcerun", "train", "--", target)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert job_counts(dry.stdout) == {"train": 1, "evaluate": 1, "total": 2}
    other = ci_run / CI_OUT / "cells" / CI_CELLS[1] / "eval" / "results.json"
    before = other.stat().st_mtime_ns, (ci_run / target).stat().st_mtime_ns
    result = snakemake(
        ci_run, "--cores", "2", "--configfile", ".test/config/test.yaml", "--forcerun", "train", "--", target
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert other.stat().st_mtime_ns == before[0]
    assert (ci_run / target).stat().st_mtime_ns > before[1]
    nothing = snakemake(ci_run, "-n", "--configfile", ".test/config/test.yaml", "--", target)
    assert "Nothing to be done" in nothing.stdout + nothing.stderr


@pytest.mark.slow
def test_tables_and_figures_alone_are_rebuilt_from_existing_results(ci_run):
    args = ("--configfile", ".test/config/test.yaml", "--forcerun", "aggregate", "--allowed-rules", "aggregate")
    dry = snakemake(ci_run, "-n", *args, "--", "results/ci-test/tables/scores.csv")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert job_counts(dry.stdout) == {"aggregate": 1, "total": 1}
    args = (
        "--configfile",
        ".test/config/test.yaml",
        "--forcerun",
        "aggregate",
        "--allowed-rules",
        "aggregate",
        "figure",
        "figures",
    )
    dry = snakemake(ci_run, "-n", *args, "--", "figures")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert job_counts(dry.stdout) == {"aggregate": 1, "figure": len(FIGURES), "figures": 1, "total": len(FIGURES) + 2}


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def mlflow_server(ci_run):
    """`mlflow server` on a free port of 127.0.0.1 over the run's store; stopped with all its children."""
    with serve_mlflow("sqlite:///results/mlflow.db", ci_run) as address:
        yield address


@pytest.mark.slow
@pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("KLRL_REQUIRE_BROWSER"),
    reason="Debian's chromium is not installed (CI sets KLRL_REQUIRE_BROWSER=1 and installs it)",
)
def test_every_cell_is_in_mlflow_and_the_ui_shows_the_runs(ci_run, mlflow_server, tmp_path):
    runs_file = json.loads((ci_run / CI_OUT / "mlflow" / "runs.json").read_text())
    runs = _post(f"{mlflow_server}/api/2.0/mlflow/runs/search", {"experiment_ids": [runs_file["experiment_id"]]})[
        "runs"
    ]
    by_name = {run["info"]["run_name"]: run for run in runs}
    assert set(by_name) == {"grid", "base/tiny", *CI_CELLS}
    parent = by_name["grid"]["info"]["run_id"]
    for cell in CI_CELLS:
        run = by_name[cell]
        tags = {tag["key"]: tag["value"] for tag in run["data"]["tags"]}
        metrics = {metric["key"] for metric in run["data"]["metrics"]}
        params = {param["key"]: param["value"] for param in run["data"]["params"]}
        assert tags["mlflow.parentRunId"] == parent
        keys = ("model", "kl", "beta", "policy", "seed")
        assert {key: tags[key] for key in keys} == {key: str(parse_cell_id(cell)[key]) for key in keys}
        assert {
            "rollout/reward_mean",
            "kl/k1",
            "periodic_eval/pass_at_1",
            "final_eval/arith/pass_at_1",
            "final_eval/arith-long/pass_at_1",
        } <= metrics
        assert params["kl"] == parse_cell_id(cell)["kl"] and params["steps"] == "3"
        assert run["info"]["status"] == "FINISHED"
    assert "final_eval/arith/pass_at_1" in {m["key"] for m in by_name["base/tiny"]["data"]["metrics"]}
    for folder, expected in (("tables", "main.csv"), ("figures", "k1_loss_beta.png")):
        query = f"run_id={parent}&path={folder}"
        with urllib.request.urlopen(f"{mlflow_server}/api/2.0/mlflow/artifacts/list?{query}", timeout=30) as response:
            listed = {Path(item["path"]).name for item in json.loads(response.read()).get("files", [])}
        assert expected in listed, (folder, listed)

    shots = capture(
        mlflow_server, ci_run / CI_OUT / "mlflow" / "runs.json", list(CI_CELLS), tmp_path, "rollout/reward_mean"
    )
    assert [shot.name for shot in shots] == ["mlflow_runs.png", "mlflow_curves.png", "mlflow_compare.png"]
    assert all(shot.stat().st_size > 20_000 for shot in shots)
    with pytest.raises(ValueError, match="no run for tiny__nonesuch"):
        capture(mlflow_server, ci_run / CI_OUT / "mlflow" / "runs.json", ["tiny__nonesuch"], tmp_path)


@pytest.mark.slow
def test_the_html_report_holds_the_tables(ci_run):
    result = snakemake(ci_run, "--configfile", ".test/config/test.yaml", "--report", "results/ci-test/report.html")
    assert result.returncode == 0, result.stderr[-3000:]
    report = (ci_run / CI_OUT / "report.html").read_text()
    assert "scores.csv" in report and "bias.csv" in report
    assert "Cells: every on-policy k1-loss, k1-reward and none cell. Scale: toy." in report  # the figure's caption
    assert (
        "klrl reproduces" in report and "klrl-ci-test" in report
    )  # the workflow description (workflow/report/workflow.rst)


@pytest.mark.slow
def test_a_hub_model_declared_in_a_config_runs_a_cell_without_code_changes(tmp_path, tiny_base):
    """A model added under `models:` with `hub:` (a local folder standing in for the download)
    trains and evaluates through the whole workflow; its declared stop token reaches both jobs."""
    folder = copy_workflow(tmp_path)
    config = load_config("test")
    config["experiment"] = "hub-model"
    config["tracking"] = {"enabled": False}
    config["models"] = {"my-hub-model": {"hub": str(tiny_base), "stop_tokens": ["z"]}}  # a letter it often writes
    config["groups"] = [dict(config["groups"][0], models=["my-hub-model"])]
    (folder / "hub.yaml").write_text(yaml.safe_dump(config))
    cell = "my-hub-model__k1-reward__b0.1__on__s0"
    result = snakemake(
        folder, "--cores", "2", "--configfile", "hub.yaml", "--", f"results/hub-model/cells/{cell}/eval/results.json"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    settings = json.loads((folder / "results" / "hub-model" / "cells" / cell / "train" / "settings.json").read_text())
    assert (settings["base_model"], settings["stop_tokens"]) == (str(tiny_base), ["z"])
    assert not list((folder / "results" / "bases").glob("my-hub-model*"))  # loaded, not built
    samples = records(folder / "results" / "hub-model" / "cells" / cell / "eval" / "samples" / "arith.jsonl")
    completions = [text for record in samples for text in record["completions"]]
    assert all("z" not in text[:-1] for text in completions)  # "z" ends a completion ...
    assert any(text.endswith("z") for text in completions)  # ... and did end some


def test_staleness_is_a_grid_axis():
    config = load_config("test")
    off = config["groups"][1]
    off["lag"] = [1, 3]  # at most the cell's 3 steps
    del off["train"]["async_lag"]
    cells = expand_grid(config)
    lagged = {cell.id: cell.train["async_lag"] for cell in cells.values() if cell.policy == "off"}
    assert lagged == {"tiny__k3-loss__b0.1__off-lag1__s0": 1, "tiny__k3-loss__b0.1__off-lag3__s0": 3}
    assert [parse_cell_id(cid)["lag"] for cid in lagged] == [1, 3]
    off["train"]["async_lag"] = 1
    with pytest.raises(
        ValueError, match="group 'off-policy': a lag list needs policy \\[off\\] and no train.async_lag"
    ):
        expand_grid(config)


@pytest.mark.slow
def test_two_configs_in_one_checkout_keep_their_own_trees_and_leave_tracked_files_alone(ci_run):
    """After .test/config/test.yaml (ci_run), a second config runs in the same checkout: both result
    trees stay whole, no tracked file changes (figures go under results/<experiment>/), and the
    second config, whose base recipe is the first's, trains from the base the first built."""
    subprocess.run(["git", "init", "-q"], cwd=ci_run, check=True)
    (ci_run / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    subprocess.run(["git", "add", "-A"], cwd=ci_run, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tracked"], cwd=ci_run, check=True
    )
    before = {path: path.read_bytes() for path in (ci_run / CI_OUT).rglob("*.csv")}
    assert before
    other = load_config("test")
    other["experiment"], other["tracking"] = "ci-other", {"enabled": False}
    other["data"]["arith"]["train_size"] = 32  # a different recipe for the same task name
    other["groups"] = other["groups"][:1]
    (ci_run / "config" / "other.yaml").write_text(yaml.safe_dump(other))
    subprocess.run(["git", "add", "config/other.yaml"], cwd=ci_run, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "other"], cwd=ci_run, check=True
    )
    (base,) = (ci_run / "results" / "bases").iterdir()
    built = (base / "model" / "model.safetensors").stat().st_mtime_ns
    result = snakemake(ci_run, "--cores", "2", "--configfile", "config/other.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "build_base" not in job_counts(result.stdout + result.stderr)
        and job_counts(result.stdout + result.stderr)["train"] == 1
    )
    assert [path.name for path in (ci_run / "results" / "bases").iterdir()] == [base.name]
    assert (base / "model" / "model.safetensors").stat().st_mtime_ns == built
    assert {path: path.read_bytes() for path in (ci_run / CI_OUT).rglob("*.csv")} == before
    assert (ci_run / "results" / "ci-other" / "tables" / "main.csv").is_file()
    assert len((ci_run / "results" / "ci-other" / "data" / "arith" / "train.jsonl").read_text().splitlines()) == 32
    assert len((ci_run / CI_OUT / "data" / "arith" / "train.jsonl").read_text().splitlines()) == 64
    status = subprocess.run(["git", "status", "--porcelain"], cwd=ci_run, capture_output=True, text=True, check=True)
    assert status.stdout == ""


@pytest.mark.slow
def test_the_smollm2_study_in_miniature_trains_evaluates_and_measures_a_cell(tmp_path):
    """config/smollm2.yaml with config/overlays/smollm2-mini.yaml: the converted SmolLM2, its
    spoken task with its shots, and one of its cells (K1 in the reward, whose KL term moves the
    policy) through training, lm-eval and the KL measurement under bf16-autocast (3 RL steps). Its
    other cells differ from it by the KL configuration alone, which the paper miniature runs."""
    folder = copy_workflow(tmp_path)
    configs = ("--configfile", "config/smollm2.yaml", "config/overlays/smollm2-mini.yaml")
    mini = load_config("smollm2", overlay="smollm2-mini")
    cells = expand_grid(mini)
    cell = next(cell for cell in cells.values() if cell.kl == "k1-reward")
    out = folder / "results" / "smollm2-mini" / "cells" / cell.id
    result = snakemake(
        folder, "--cores", "2", str(out.relative_to(folder) / "eval" / "results.json"), *configs, timeout=1800
    )
    assert result.returncode == 0, result.stderr[-5000:]
    assert cell.train["mixed_precision"] == "bf16-autocast"
    status = yaml.safe_load((out / "train" / "status.json").read_text())
    assert (status["status"], status["step"]) == ("completed", 3)
    assert [row["step"] for row in records(out / "train" / "metrics.jsonl")] == [0, 1, 2, 3]
    results = json.loads((out / "eval" / "results.json").read_text())
    assert set(results["tasks"]) == {"arith-spoken"}
    shots = mini["data"]["arith-spoken"]["shots"]
    samples = records(out / "eval" / "samples" / "arith-spoken.jsonl")
    assert len(samples) == 3 and all(shots[1]["assistant"] in sample["prompt"] for sample in samples)
    measured = results["mechanism"]
    assert (measured["prompts"], measured["samples"], measured["beta"]) == (3, 2, cell.beta)
    assert measured["kl_reverse"] >= 0 and measured["objective"] == pytest.approx(
        measured["reward"] - cell.beta * measured["kl_reverse"]
    )
