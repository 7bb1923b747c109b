"""The Snakemake workflow: config checks, the grid, the paper DAG, and config/test.yaml end to end
with MLflow (REST API and the UI in headless Chromium)."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import yaml

from klrl.grid import GRID_KEYS, cell_id, expand_grid, parse_cell_id
from klrl.kl import STANDARD_NAMES
from klrl.models import BUILT_MODELS
from klrl.tasks import TASKS
from klrl.training.config import GENERATION_BACKENDS, PRECISIONS, VLLM_DTYPES, TrainConfig

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ("Snakefile", "workflow/rules", "workflow/schemas", "workflow/report", "config", "envs", "profiles", "paper_figures")
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
CHROMIUM = "/usr/bin/chromium"  # Debian's package; `make test` installs it where it can


def _config(name: str) -> dict:
    return yaml.safe_load((ROOT / "config" / f"{name}.yaml").read_text())


def _copy_workflow(folder: Path) -> Path:
    """The workflow's files (not the package, which is installed) in a fresh folder."""
    for name in WORKFLOW_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, folder / name)
        else:
            shutil.copy(source, folder / name)
    return folder


def _snakemake(folder: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [str(SNAKEMAKE), *args], cwd=folder, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


def _job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a Snakemake run or dry run."""
    lines = output[output.index("Job stats:") :].splitlines()[3:]
    counts = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


# ---------------------------------------------------------------------------------- config


def test_the_schema_enums_are_the_codes_registries():
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema["$defs"]["kl"]["enum"] == list(STANDARD_NAMES)
    assert schema["$defs"]["task"]["enum"] == list(TASKS)
    assert all(re.fullmatch(schema["$defs"]["model"]["pattern"], name) for name in BUILT_MODELS)
    assert schema["$defs"]["train"]["properties"]["generation_backend"]["enum"] == list(GENERATION_BACKENDS)
    assert schema["$defs"]["train"]["properties"]["vllm_dtype"]["enum"] == list(VLLM_DTYPES)
    train_keys = {field for field in TrainConfig.__dataclass_fields__ if field not in GRID_KEYS}
    assert set(schema["$defs"]["train"]["properties"]) == train_keys
    assert schema["$defs"]["train"]["properties"]["mixed_precision"]["enum"] == list(PRECISIONS)


def test_the_default_grid_measures_every_claim():
    cells = expand_grid(_config("config"))
    assert len(cells) == 38
    assert sum(cell.kl == "none" for cell in cells.values()) == 4  # once per policy mode and seed, at β 0
    on = {cell.kl for cell in cells.values() if cell.policy == "on"}
    assert on == {"none", "k1-reward", "k1-loss", "k2-loss", "k3-reward", "k3-loss", "k1-both", "k3-both"}
    off = [cell for cell in cells.values() if cell.policy == "off"]
    assert {cell.kl for cell in off} == {"none", "k1-reward", "k1-loss", "k3-reward", "k3-loss", "k1-reward-prefixis"}
    assert all(cell.train["async_lag"] == 4 and cell.train["advantage"] == "group-mean" for cell in off)
    cell = cells["tiny__k1-loss__b1__on__s1"]
    assert cell.train["async_lag"] == 0
    assert (cell.train["kl"]["name"], cell.train["kl"]["beta"], cell.train["seed"]) == ("k1-loss", 1.0, 1)
    assert cell.train["base_model"] == "results/default/base/tiny/model"
    assert cell.train["train_data"] == "results/default/data/arith/train.jsonl"
    assert parse_cell_id(cell.id) == {"model": "tiny", "kl": "k1-loss", "beta": 1.0, "policy": "on", "lag": 0, "seed": 1}


def test_cell_ids_round_trip():
    for beta in (0.0, 0.005, 0.1, 1.0, 1e-5):
        assert parse_cell_id(cell_id("qwen2.5-7b", "k3-loss-tokis", beta, "off", 12))["beta"] == beta


def test_grid_errors_name_the_group_and_the_key():
    config = _config("test")
    off = config["groups"][1]
    off["train"] = {}
    with pytest.raises(ValueError, match="group 'off-policy': policy 'off' needs train.async_lag"):
        expand_grid(config)
    config = _config("test")
    config["train"]["seed"] = 3
    with pytest.raises(ValueError, match="train: 'seed' is set by the grid"):
        expand_grid(config)
    config = _config("test")
    config["train"]["kl"] = {"name": "k1-loss"}
    with pytest.raises(ValueError, match="train: 'name' is set by the grid"):
        expand_grid(config)
    config = _config("test")
    config["groups"][1] = dict(config["groups"][0], name="again")
    with pytest.raises(ValueError, match="cell tiny__k1-reward__b0.1__on__s0 is in groups 'on-policy' and 'again'"):
        expand_grid(config)
    config = _config("test")
    config["train"]["minibatches"] = 3  # 4 prompts × 4 samples is not divisible by 3
    with pytest.raises(ValueError, match="group 'on-policy', cell tiny__k1-reward__b0.1__on__s0: .*'minibatches'"):
        expand_grid(config)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["train"].update(stepz=3), "config: train: unknown key 'stepz'; allowed: activation_checkpointing, adam_betas,"),
        (lambda c: c["groups"][0].update(kl=["k4-reward"]), "config: groups[0].kl[0]: 'k4-reward' is not one of none, k1-reward, k1-loss,"),
        (lambda c: c["evaluation"].update(samples=0), "config: evaluation.samples: 0 is less than the minimum of 1"),
        (lambda c: c.pop("experiment"), "config: (top level): 'experiment' is a required property"),
        (lambda c: c["data"].pop("arith-long"), "config: groups[on-policy].eval_tasks: task 'arith-long' is generated; give data.arith-long.train_size"),
        (lambda c: c.update(tracking={"uri": "sqlte:/x.db"}), "config: tracking.uri 'sqlte:/x.db': scheme 'sqlte' is not one of sqlite,"),
        (lambda c: c.update(tracking={"uri": "sqlite://results/x.db"}), "a SQLite store is sqlite:///<path>"),
    ],
)
def test_a_bad_config_stops_snakemake_before_any_job(tmp_path, edit, message):
    """One message naming the key and what is allowed, never the schema or the config dumped."""
    folder = _copy_workflow(tmp_path)
    config = _config("test")
    edit(config)
    (folder / "bad.yaml").write_text(yaml.safe_dump(config))
    result = _snakemake(folder, "-n", "--configfile", "bad.yaml")
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    assert len((result.stdout + result.stderr).splitlines()) < 10
    assert "$schema" not in result.stdout + result.stderr
    assert not (folder / "results").exists()


def test_config_overrides_apply_on_top_of_the_default_config(tmp_path):
    folder = _copy_workflow(tmp_path)
    result = _snakemake(folder, "-n", "-p", "--config", "experiment=override", "--", "results/override/mlflow/runs.json")
    assert result.returncode == 0, result.stderr[-2000:]
    default_cells = expand_grid(_config("config"))
    assert f"--cells {' '.join(f'{c.group}:{c.id}' for c in default_cells.values())}" in " ".join(result.stdout.split())


def test_an_unknown_cell_path_names_the_closest_cells(tmp_path):
    folder = _copy_workflow(tmp_path)
    result = _snakemake(folder, "-n", "--configfile", "config/test.yaml", "--", "results/ci-test/cells/tiny__k1-reward__b0.1__on__s5/eval/results.json")
    assert result.returncode != 0
    assert "'tiny__k1-reward__b0.1__on__s5' is not a cell of this config; closest: tiny__k1-reward__b0.1__on__s0" in result.stdout + result.stderr


def test_the_paper_config_dry_runs_to_its_grid(tmp_path):
    folder = _copy_workflow(tmp_path)
    cells = expand_grid(_config("paper"))
    assert len(cells) == 2 * (1 + 4 * 4) + 2 + 5 + 5 + 1  # on-policy β sweep ×2 models, both, off-policy ×2 tasks, prefix-IS
    result = _snakemake(folder, "-n", "--configfile", "config/paper.yaml", "--profile", "profiles/slurm")
    assert result.returncode == 0, result.stderr[-3000:]
    counts = _job_counts(result.stdout)
    assert counts["train"] == counts["evaluate"] == len(cells)
    assert counts["evaluate_base"] == 3
    assert counts["prepare_data"] == 5
    assert counts["figure"] == 8
    assert counts["cell_settings"] == len(cells)
    assert counts["total"] == 3 * len(cells) + 3 + 5 + 8 + 5  # + track_grid, toy_bias, aggregate, track_figures, all
    assert "gpu=8" in result.stdout and "gpu=4" in result.stdout


def _train_commands(output: str) -> list[str]:
    """How each train job's shell command (one line in `snakemake -n -p` output) starts `klrl train`."""
    return [line.strip().partition(" train ")[0] for line in output.splitlines() if " klrl train " in line]


def test_a_batch_that_gpus_cannot_share_is_a_grid_error():
    config = _config("paper")
    config["train"]["prompts_per_step"] = 250
    with pytest.raises(ValueError, match="group 'on-policy': prompts_per_step 250 is not a multiple of the 8 training processes"):
        expand_grid(config)


def test_multi_gpu_cells_train_under_torchrun(tmp_path):
    folder = _copy_workflow(tmp_path)
    paper = _snakemake(folder, "-n", "-p", "--configfile", "config/paper.yaml")
    assert paper.returncode == 0, paper.stderr[-3000:]
    commands = _train_commands(paper.stdout)
    cells = expand_grid(_config("paper"))
    assert len(commands) == len(cells)
    four = sum(cell.model == "qwen3-4b-instruct" for cell in cells.values())
    assert commands.count("torchrun --standalone --nproc_per_node 8 -m klrl") == len(cells) - four
    assert commands.count("torchrun --standalone --nproc_per_node 4 -m klrl") == four > 0
    test = _snakemake(folder, "-n", "-p", "--configfile", "config/test.yaml")
    assert test.returncode == 0, test.stderr[-3000:]
    commands = _train_commands(test.stdout)
    assert commands and set(commands) == {"python -m klrl"}


def test_the_workflow_lints_clean(tmp_path):
    folder = _copy_workflow(tmp_path)
    result = _snakemake(folder, "--lint", "--configfile", "config/test.yaml")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in result.stdout + result.stderr


# ------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory) -> Path:
    """config/test.yaml run through Snakemake from nothing: data, tiny base, 2 cells, evaluation, tables."""
    folder = _copy_workflow(tmp_path_factory.mktemp("workflow"))
    result = _snakemake(folder, "--cores", "2", "--configfile", "config/test.yaml")
    assert result.returncode == 0, result.stderr[-5000:]
    return folder


CI_CELLS = ("tiny__k1-reward__b0.1__on__s0", "tiny__k3-loss__b0.1__off__s0")
CI_OUT = Path("results") / "ci-test"  # config/test.yaml's experiment


@pytest.mark.slow
def test_the_ci_grid_runs_end_to_end(ci_run):
    scores = pd.read_csv(ci_run / CI_OUT / "tables" / "scores.csv")
    assert sorted(zip(scores["cell"], scores["task"])) == sorted((c, t) for c in CI_CELLS for t in ("arith", "arith-long"))
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
    for rule in ("train", "evaluate"):
        assert (ci_run / CI_OUT / "benchmarks" / rule / f"{CI_CELLS[0]}.tsv").is_file()
        assert (ci_run / CI_OUT / "logs" / rule / f"{CI_CELLS[0]}.log").is_file()


@pytest.mark.slow
def test_rerunning_one_cell_reruns_only_its_jobs(ci_run):
    target = f"results/ci-test/cells/{CI_CELLS[0]}/eval/results.json"
    dry = _snakemake(ci_run, "-n", "--configfile", "config/test.yaml", "--forcerun", "train", "--", target)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert _job_counts(dry.stdout) == {"train": 1, "evaluate": 1, "total": 2}
    other = ci_run / CI_OUT / "cells" / CI_CELLS[1] / "eval" / "results.json"
    before = other.stat().st_mtime_ns, (ci_run / target).stat().st_mtime_ns
    result = _snakemake(ci_run, "--cores", "2", "--configfile", "config/test.yaml", "--forcerun", "train", "--", target)
    assert result.returncode == 0, result.stderr[-3000:]
    assert other.stat().st_mtime_ns == before[0]
    assert (ci_run / target).stat().st_mtime_ns > before[1]
    nothing = _snakemake(ci_run, "-n", "--configfile", "config/test.yaml", "--", target)
    assert "Nothing to be done" in nothing.stdout + nothing.stderr


@pytest.mark.slow
def test_tables_and_figures_alone_are_rebuilt_from_existing_results(ci_run):
    args = ("--configfile", "config/test.yaml", "--forcerun", "aggregate", "--allowed-rules", "aggregate")
    dry = _snakemake(ci_run, "-n", *args, "--", "results/ci-test/tables/scores.csv")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert _job_counts(dry.stdout) == {"aggregate": 1, "total": 1}
    args = ("--configfile", "config/test.yaml", "--forcerun", "aggregate", "--allowed-rules", "aggregate", "figure", "figures")
    dry = _snakemake(ci_run, "-n", *args, "--", "figures")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert _job_counts(dry.stdout) == {"aggregate": 1, "figure": 8, "figures": 1, "total": 10}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def mlflow_server(ci_run):
    """`mlflow server` on a free port of 127.0.0.1 over the run's store; stopped with all its children."""
    port = _free_port()
    command = [str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--backend-store-uri", "sqlite:///results/mlflow.db"]
    server = subprocess.Popen(command, cwd=ci_run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"http://127.0.0.1:{port}"
    try:
        for _ in range(180):
            try:
                with urllib.request.urlopen(f"{address}/health", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, "mlflow server exited"
                time.sleep(1)
        else:
            pytest.fail("mlflow server did not answer /health within 180 s")
        yield address
    finally:
        _stop_group(server)


def _group_alive(leader: int) -> bool:
    """Whether any process of the group still runs (zombies, already dead, do not count)."""
    listing = subprocess.run(["ps", "-e", "-o", "pgid=,stat="], capture_output=True, text=True, check=True)
    return any(pgid == str(leader) and not stat.startswith("Z") for pgid, stat in map(str.split, listing.stdout.splitlines()))


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM the process group (the server and its workers), SIGKILL what outlives 20 s, then
    check that nothing of the group is left."""
    os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while _group_alive(process.pid) and time.monotonic() < deadline:
        process.poll()
        time.sleep(0.5)
    if _group_alive(process.pid):
        os.killpg(process.pid, signal.SIGKILL)
        time.sleep(1)
    process.wait(timeout=30)
    assert not _group_alive(process.pid), "the server left processes behind"


@pytest.mark.slow
@pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("KLRL_REQUIRE_BROWSER"),
    reason="Debian's chromium is not installed (CI sets KLRL_REQUIRE_BROWSER=1 and installs it)",
)
def test_every_cell_is_in_mlflow_and_the_ui_shows_the_runs(ci_run, mlflow_server, tmp_path):
    runs_file = json.loads((ci_run / CI_OUT / "mlflow" / "runs.json").read_text())
    runs = _post(f"{mlflow_server}/api/2.0/mlflow/runs/search", {"experiment_ids": [runs_file["experiment_id"]]})["runs"]
    by_name = {run["info"]["run_name"]: run for run in runs}
    assert set(by_name) == {"grid", "base/tiny", *CI_CELLS}
    parent = by_name["grid"]["info"]["run_id"]
    for cell in CI_CELLS:
        run = by_name[cell]
        tags = {tag["key"]: tag["value"] for tag in run["data"]["tags"]}
        metrics = {metric["key"] for metric in run["data"]["metrics"]}
        params = {param["key"]: param["value"] for param in run["data"]["params"]}
        assert tags["mlflow.parentRunId"] == parent
        assert {key: tags[key] for key in ("model", "kl", "beta", "policy", "seed")} == {
            key: str(value) for key, value in parse_cell_id(cell).items()
        }
        assert {"rollout/reward_mean", "kl/k1", "periodic_eval/pass_at_1", "final_eval/arith/pass_at_1", "final_eval/arith-long/pass_at_1"} <= metrics
        assert params["kl"] == parse_cell_id(cell)["kl"] and params["steps"] == "3"
        assert run["info"]["status"] == "FINISHED"
    assert "final_eval/arith/pass_at_1" in {m["key"] for m in by_name["base/tiny"]["data"]["metrics"]}
    for folder, expected in (("tables", "main.csv"), ("figures", "k1_loss_beta.png")):
        query = f"run_id={parent}&path={folder}"
        with urllib.request.urlopen(f"{mlflow_server}/api/2.0/mlflow/artifacts/list?{query}", timeout=30) as response:
            listed = {Path(item["path"]).name for item in json.loads(response.read()).get("files", [])}
        assert expected in listed, (folder, listed)

    from playwright.sync_api import sync_playwright

    screenshot = tmp_path / "mlflow-ui.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1600, "height": 900})
        page.goto(f"{mlflow_server}/#/experiments/{runs_file['experiment_id']}/runs")
        grid = page.get_by_text("grid", exact=True)
        grid.wait_for(timeout=120_000)
        page.locator("[role=row]", has=grid).locator("button[data-component-id*=runnamecellrenderer]").click()
        for name in ("base/tiny", *CI_CELLS):
            page.get_by_text(name, exact=True).wait_for(timeout=60_000)
        page.screenshot(path=str(screenshot))
        browser.close()
    assert screenshot.stat().st_size > 20_000


@pytest.mark.slow
def test_the_html_report_holds_the_tables(ci_run):
    result = _snakemake(ci_run, "--configfile", "config/test.yaml", "--report", "results/ci-test/report.html")
    assert result.returncode == 0, result.stderr[-3000:]
    report = (ci_run / CI_OUT / "report.html").read_text()
    assert "scores.csv" in report and "bias.csv" in report
    assert "Cells: every on-policy k1-loss, k1-reward and none cell. Scale: toy." in report  # the figure's caption
    assert "klrl reproduces" in report and "klrl-ci-test" in report  # the workflow description (workflow/report/workflow.rst)


@pytest.mark.slow
def test_a_hub_model_declared_in_a_config_runs_a_cell_without_code_changes(tmp_path, tiny_base):
    """A model added under `models:` with `hub:` (a local folder standing in for the download)
    trains and evaluates through the whole workflow; its declared stop token reaches both jobs."""
    folder = _copy_workflow(tmp_path)
    config = _config("test")
    config["experiment"] = "hub-model"
    config["tracking"] = {"enabled": False}
    config["models"] = {"my-hub-model": {"hub": str(tiny_base), "stop_tokens": ["z"]}}  # a letter it often writes
    config["groups"] = [dict(config["groups"][0], models=["my-hub-model"])]
    (folder / "hub.yaml").write_text(yaml.safe_dump(config))
    cell = "my-hub-model__k1-reward__b0.1__on__s0"
    result = _snakemake(folder, "--cores", "2", "--configfile", "hub.yaml", "--", f"results/hub-model/cells/{cell}/eval/results.json")
    assert result.returncode == 0, result.stderr[-3000:]
    settings = json.loads((folder / "results" / "hub-model" / "cells" / cell / "train" / "settings.json").read_text())
    assert (settings["base_model"], settings["stop_tokens"]) == (str(tiny_base), ["z"])
    assert not (folder / "results" / "hub-model" / "base" / "my-hub-model" / "model").exists()  # loaded, not built
    samples = [json.loads(line) for line in (folder / "results" / "hub-model" / "cells" / cell / "eval" / "samples" / "arith.jsonl").read_text().splitlines()]
    completions = [text for record in samples for text in record["completions"]]
    assert all("z" not in text[:-1] for text in completions)  # "z" ends a completion ...
    assert any(text.endswith("z") for text in completions)  # ... and did end some


def test_staleness_is_a_grid_axis():
    config = _config("test")
    off = config["groups"][1]
    off["lag"] = [2, 8]
    del off["train"]["async_lag"]
    cells = expand_grid(config)
    lagged = {cell.id: cell.train["async_lag"] for cell in cells.values() if cell.policy == "off"}
    assert lagged == {"tiny__k3-loss__b0.1__off-lag2__s0": 2, "tiny__k3-loss__b0.1__off-lag8__s0": 8}
    assert [parse_cell_id(cid)["lag"] for cid in lagged] == [2, 8]
    off["train"]["async_lag"] = 1
    with pytest.raises(ValueError, match="group 'off-policy': a lag list needs policy \\[off\\] and no train.async_lag"):
        expand_grid(config)


@pytest.mark.slow
def test_two_configs_in_one_checkout_keep_their_own_trees_and_leave_tracked_files_alone(ci_run):
    """After config/test.yaml (ci_run), a second config runs in the same checkout: both result
    trees stay whole, and no tracked file changes (figures go under results/<experiment>/)."""
    subprocess.run(["git", "init", "-q"], cwd=ci_run, check=True)
    (ci_run / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    subprocess.run(["git", "add", "-A"], cwd=ci_run, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tracked"], cwd=ci_run, check=True)
    before = {path: path.read_bytes() for path in (ci_run / CI_OUT).rglob("*.csv")}
    assert before
    other = _config("test")
    other["experiment"], other["tracking"] = "ci-other", {"enabled": False}
    other["data"]["arith"]["train_size"] = 32  # a different recipe for the same task name
    other["groups"] = other["groups"][:1]
    (ci_run / "config" / "other.yaml").write_text(yaml.safe_dump(other))
    subprocess.run(["git", "add", "config/other.yaml"], cwd=ci_run, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "other"], cwd=ci_run, check=True)
    result = _snakemake(ci_run, "--cores", "2", "--configfile", "config/other.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    assert {path: path.read_bytes() for path in (ci_run / CI_OUT).rglob("*.csv")} == before
    assert (ci_run / "results" / "ci-other" / "tables" / "main.csv").is_file()
    assert len((ci_run / "results" / "ci-other" / "data" / "arith" / "train.jsonl").read_text().splitlines()) == 32
    assert len((ci_run / CI_OUT / "data" / "arith" / "train.jsonl").read_text().splitlines()) == 64
    status = subprocess.run(["git", "status", "--porcelain"], cwd=ci_run, capture_output=True, text=True, check=True)
    assert status.stdout == ""


@pytest.mark.slow
def test_the_paper_grid_in_miniature_runs_end_to_end(tmp_path):
    """config/paper.yaml with config/overlays/cpu-mini.yaml: every group of the paper's grid through
    the same rules, torchrun with 2 CPU processes, bf16 over fp32 master weights, micro-batches,
    the MATH/MMLU loaders on their fixtures, Countdown, lm-eval, the tables and the figures."""
    folder = _copy_workflow(tmp_path)
    configs = ("--configfile", "config/paper.yaml", "config/overlays/cpu-mini.yaml")
    dry = _snakemake(folder, "-n", "-p", *configs)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert set(_train_commands(dry.stdout)) == {"torchrun --standalone --nproc_per_node 2 -m klrl"}
    result = _snakemake(folder, "--cores", "2", "--keep-going", *configs, timeout=3600)
    assert result.returncode == 0, result.stderr[-5000:]
    mini = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    from snakemake.utils import update_config

    update_config(mini, yaml.safe_load((ROOT / "config" / "overlays" / "cpu-mini.yaml").read_text()))
    cells = expand_grid(mini)
    out = folder / "results" / "paper-cpu-mini"
    scores = pd.read_csv(out / "tables" / "scores.csv")
    assert set(scores["cell"]) == set(cells)
    assert set(scores["status"]) == {"completed"}
    assert {cell.group for cell in cells.values()} == {group["name"] for group in _config("paper")["groups"]}
    for cell in cells.values():
        saved = yaml.safe_load((out / "cells" / cell.id / "train" / "config.yaml").read_text())
        assert (saved["mixed_precision"], saved["micro_batch_size"], saved["device"]) == ("bf16", 1, "cpu")
        log = (out / "logs" / "train" / f"{cell.id}.log").read_text()
        assert "2 processes" in log, log[-2000:]
    tasks = set(scores["task"])
    assert {"math", "mmlu-college-physics", "mmlu-college-chemistry", "mmlu-college-biology", "countdown"} <= tasks
    assert len(list((out / "figures").glob("*.png"))) == 8
