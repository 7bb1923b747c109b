# Input functions and the expanded grid; the expansion and its checks are klrl.grid's.
# Every output of a config lives under OUT = results/<experiment>/ (klrl.grid.results_root), so
# two configs in one checkout never write each other's files.
import ast
import json
import re
import shlex
from pathlib import Path

from klrl.grid import (
    base_eval_tasks,
    eval_job_resources,
    expand_grid,
    job_resources,
    model_path,
    results_root,
    settings_json,
    train_launcher,
    used_tasks,
)
from klrl.models import BUILT_MODELS, get_base_model
from klrl.models.recipe import BASES, build_arguments, recipe_hash

OUT = str(results_root(config))
CELLS = expand_grid(config)
BASE_TASKS = base_eval_tasks(CELLS)
TASKS = used_tasks(CELLS)
RUNS = f"{OUT}/mlflow/runs.json"
EVALUATION = config["evaluation"]


wildcard_constraints:
    cell="|".join(CELLS),
    model="|".join(BASE_TASKS),
    task="|".join(TASKS),


def base_model_input(model):
    """The built base model's config.json (in the folder of its recipe, results/bases/), or
    nothing for a Hub model (downloaded by the job)."""
    if get_base_model(model, config.get("models")).build == "hub":
        return []
    return f"{model_path(model, config)}/config.json"


def build_options(wildcards):
    """The build verb's options for this config's recipe of the model; a folder whose hash is
    not that recipe's is refused (it would hold another recipe's model)."""
    options = config.get("models", {}).get(wildcards.model, {}).get("pretrain")
    expected = recipe_hash(wildcards.model, options)
    if wildcards.recipe != expected:
        raise ValueError(
            f"{BASES}/{wildcards.model}-{wildcards.recipe}: not the recipe of this config's {wildcards.model} ({wildcards.model}-{expected})"
        )
    return " ".join(shlex.quote(argument) for argument in build_arguments(wildcards.model, options))


def model_options(model, revision=True):
    """`klrl evaluate` options of a model declared in the config: its revision and stop tokens
    (a trained cell's folder has no revision)."""
    base = get_base_model(model, config.get("models"))
    flags = [f"--revision {shlex.quote(base.revision)}"] if revision and base.revision else []
    if base.stop_tokens:
        flags.append("--stop-tokens " + " ".join(shlex.quote(token) for token in base.stop_tokens))
    return " ".join(flags)


def data_inputs(tasks):
    return [f"{OUT}/data/{task}/manifest.json" for task in tasks]


def data_options(task):
    options = config["data"].get(task, {})
    flags = {"train_size": "--train-size", "test_size": "--test-size", "seed": "--seed", "source": "--source"}
    flags |= {"instruction": "--instruction", "shots": "--shots"}
    text = {key: json.dumps(value) if key == "shots" else str(value) for key, value in options.items()}
    return " ".join(f"{flags[key]} {shlex.quote(text[key])}" for key in sorted(options))


def evaluation_options():
    flags = [f"--samples {EVALUATION.get('samples', 4)}", f"--max-new-tokens {EVALUATION['max_new_tokens']}"]
    flags += [f"--batch-size {EVALUATION.get('batch_size', 64)}", f"--backend {EVALUATION.get('backend', 'hf')}"]
    if EVALUATION.get("greedy"):
        flags.append("--greedy")
    if "limit" in EVALUATION:
        flags.append(f"--limit {EVALUATION['limit']}")
    return " ".join(flags)


def device(model):
    return "cuda" if job_resources(config, model)["gpus"] else "cpu"


def tracking_options():
    tracking = config.get("tracking", {})
    if not tracking.get("enabled", True):
        return "--off"
    return f"--uri {shlex.quote(tracking.get('uri', 'sqlite:///results/mlflow.db'))}"


def unknown_cell(wildcards):
    """Fails the DAG for a path under OUT/cells/ of no cell of this config, naming the closest."""
    from klrl.cells import unknown_cell_message

    raise ValueError(unknown_cell_message(wildcards.unknown_cell, CELLS))


def figure_caption(wildcards):
    """The figure script's docstring, for the report."""
    return ast.get_docstring(ast.parse(Path(f"paper_figures/{wildcards.figure}.py").read_text()))


def reconcile_runs(log):
    """End MLflow runs that killed jobs left RUNNING, by what the cells' files say (onstart and
    on exit, see tracking.smk); a failure only warns."""
    shell(
        f"python -m klrl track-reconcile --mlflow-runs {RUNS} --cells-root {OUT}/cells"
        " || echo 'klrl track-reconcile failed: MLflow run states left as they were' >&2"
    )
