"""The grid's Hub models and data sets before any job (klrl.grid.hub_access) on a stub Hub cache:
a gated model without a token, a model or data set the cache lacks with the Hub offline, each
stops the grid at load in one line; `klrl fetch` downloads each model and data set once."""

import huggingface_hub
import pytest
from klrl.cli import main as klrl
from klrl.grid.expansion import expand_grid
from klrl.grid.hub_access import first_problem
from workflow_helpers import PAPER_MACHINE, copy_workflow, load_config, snakemake

PAPER_MODELS = {
    "qwen2.5-7b": "Qwen/Qwen2.5-7B",
    "llama3.1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "qwen3-4b-instruct": "Qwen/Qwen3-4B-Instruct-2507",
}


def _cache(folder, hub_id):
    """A model in a stub Hub cache, laid out as huggingface_hub lays it out (refs/main → snapshot)."""
    model = folder / f"models--{hub_id.replace('/', '--')}"
    (model / "snapshots" / "abc123").mkdir(parents=True)
    (model / "snapshots" / "abc123" / "config.json").write_text("{}")
    (model / "refs").mkdir()
    (model / "refs" / "main").write_text("abc123")


def test_a_gated_model_without_a_token_is_named_and_a_token_or_a_cached_copy_lets_it_pass(tmp_path):
    config = load_config("paper")
    cells = expand_grid(config)
    home = {"HF_HOME": str(tmp_path / "home")}
    problem = first_problem(config, cells, set(), home)
    assert problem == (
        "model llama3.1-8b-instruct (meta-llama/Llama-3.1-8B-Instruct) is gated: accept its licence at"
        " https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct, then set HF_TOKEN (or run `hf auth login`)"
    )
    assert first_problem(config, cells, set(), home | {"HF_TOKEN": "t"}) == ""
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "token").write_text("t\n")  # as `hf auth login` leaves it
    assert first_problem(config, cells, set(), home) == ""
    (tmp_path / "home" / "token").unlink()
    _cache(tmp_path / "home" / "hub", PAPER_MODELS["llama3.1-8b-instruct"])
    assert first_problem(config, cells, set(), home) == ""


def test_offline_every_model_and_data_set_must_be_in_the_caches(tmp_path):
    config = load_config("paper")
    cells = expand_grid(config)
    cache, copies = tmp_path / "hub", tmp_path / "copies"
    offline = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    assert first_problem(config, cells, set(), offline).startswith(
        f"model qwen2.5-7b (Qwen/Qwen2.5-7B) is not in the Hub cache {cache} and HF_HUB_OFFLINE is set: run"
        " `python -m klrl fetch"
    )
    for hub_id in PAPER_MODELS.values():
        _cache(cache, hub_id)
    assert first_problem(config, cells, set(), offline).startswith(
        "data set EleutherAI/hendrycks_math (task math) needs the Hub and HF_HUB_OFFLINE is set: set KLRL_HUB_DATASETS"
    )
    mirrored = offline | {"KLRL_HUB_DATASETS": str(copies)}
    for repo in ("EleutherAI/hendrycks_math", "HuggingFaceH4/MATH-500"):
        (copies / repo).mkdir(parents=True)
    assert first_problem(config, cells, set(), mirrored).startswith(
        f"data set cais/mmlu (task mmlu-college-physics) has no copy under KLRL_HUB_DATASETS={copies}"
    )
    assert (
        first_problem(
            config, cells, {"mmlu-college-physics", "mmlu-college-chemistry", "mmlu-college-biology"}, mirrored
        )
        == ""
    )
    assert (
        first_problem(
            config, cells, {"math", "mmlu-college-physics", "mmlu-college-chemistry", "mmlu-college-biology"}, offline
        )
        == ""
    )


@pytest.mark.slow
def test_the_grid_stops_at_load_naming_the_gated_model(tmp_path):
    folder = copy_workflow(tmp_path)
    args = ("-n", "--profile", "profiles/local", "--configfile", "config/paper.yaml")
    environ = PAPER_MACHINE | {"HF_TOKEN": "", "HF_HOME": str(tmp_path / "hf-home")}
    result = snakemake(folder, *args, environ=environ)
    assert result.returncode != 0
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("model llama3.1-8b-instruct (meta-llama/Llama-3.1-8B-Instruct) is gated")
    )
    assert not (folder / "results").exists()


def test_fetch_downloads_each_model_into_the_cache_and_each_data_set_once(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo, **options: calls.append((repo, options)))
    assert klrl(["fetch", "--config", "config/paper.yaml", "--datasets", str(tmp_path)]) == 0
    models = [(repo, options) for repo, options in calls if "repo_type" not in options]
    assert models == [
        (hub_id, {"revision": None, "ignore_patterns": ["original/*"]}) for hub_id in PAPER_MODELS.values()
    ]
    datasets = {repo: options for repo, options in calls if options.get("repo_type") == "dataset"}
    assert datasets == {
        repo: {"repo_type": "dataset", "local_dir": tmp_path / repo}
        for repo in ("EleutherAI/hendrycks_math", "HuggingFaceH4/MATH-500", "cais/mmlu")
    }
    assert f"KLRL_HUB_DATASETS={tmp_path}" in capsys.readouterr().out
