# Input functions and the expanded grid; the expansion and its checks are klrl.grid.expansion's.
# Every output of a config lives under results/<experiment>/, at the paths klrl.core.paths.Layout
# spells (LAYOUT), so two configs in one checkout never write each other's files.
import ast
import json
import re
import shlex
import sys
import time
from pathlib import Path

from klrl.grid.expansion import (
    base_eval_tasks,
    eval_job_resources,
    expand_grid,
    job_resources,
    model_path,
    settings_json,
    train_launcher,
    used_tasks,
)
from klrl.grid.biased_settings import report as kl_settings_report
from klrl.grid.gpu_leases import gpu_limit, gpu_requests, lease_prefix
from klrl.grid.hub_access import first_problem
from klrl.models import get_base_model, recipe_options
from klrl.models.builds import BUILT_MODELS
from klrl.models.recipe import build_arguments, recipe_hash
from klrl.core.paths import BASES, Layout
from klrl.grid import wall_time
from klrl.analysis.preregistration import grid_cells, plan_hash, plan_of

LAYOUT = Layout.of(config)
CELLS = expand_grid(config)
BASE_TASKS = base_eval_tasks(CELLS)
# Once per run, not again in each job's own Snakemake (SLURM): Snakemake's `gpu` resource is
# the machine's GPU pool unless --resources (or the profile) sets it, and a job asking for more
# is refused here, naming it (klrl.grid.gpu_leases): Snakemake would lower its request silently.
# Each GPU job leases devices of its own (lease_prefix).
if workflow.is_main_process:
    given = workflow.global_resources.get("gpu")
    try:
        limit = gpu_limit(gpu_requests(config, CELLS, BASE_TASKS), given.value if given else None)
    except ValueError as error:
        sys.exit(str(error))
    if given is None:
        workflow.global_resources["gpu"] = limit
    # A gated model without a token, or a model or data set the Hub cannot give while offline,
    # stops the grid here in one line, before any job starts (klrl.grid.hub_access).
    problem = first_problem(config, CELLS, {task for task in used_tasks(CELLS) if LAYOUT.manifest(task).exists()})
    if problem:
        sys.exit(problem)
    sys.stderr.write(kl_settings_report(CELLS))
TASKS = used_tasks(CELLS)
RUNS = str(LAYOUT.runs_file())
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
    options = recipe_options(wildcards.model, config.get("models"))
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
    return [str(LAYOUT.manifest(task)) for task in tasks]


def data_options(task):
    options = config["data"].get(task, {})
    flags = {"train_size": "--train-size", "test_size": "--test-size", "seed": "--seed", "source": "--source"}
    flags |= {"instruction": "--instruction", "shots": "--shots"}
    text = {key: json.dumps(value) if key == "shots" else str(value) for key, value in options.items()}
    return " ".join(f"{flags[key]} {shlex.quote(text[key])}" for key in sorted(options))


def evaluation_options():
    """`klrl evaluate` options of what the config's evaluation section sets; `klrl evaluate`'s
    own defaults (klrl.evaluation.harness.CONFIG_DEFAULTS) hold for the rest."""
    flags = {
        "samples": "--samples",
        "max_new_tokens": "--max-new-tokens",
        "batch_size": "--batch-size",
        "backend": "--backend",
        "limit": "--limit",
    }
    options = [f"{flags[key]} {value}" for key, value in EVALUATION.items() if key in flags]
    return " ".join(options + ["--greedy"] * bool(EVALUATION.get("greedy")))


def mechanism_options(cell):
    """`klrl evaluate` options that measure the KL a cell attains (klrl.evaluation.mechanism): its
    base model as the reference (as rule evaluate_base reads it), its β, training task, decoding and
    autocast precision, and the measurement's size where the config's evaluation section sets it."""
    base = get_base_model(cell.model, config.get("models"))
    flags = [f"--reference {shlex.quote(model_path(cell.model, config))}"]
    flags += [f"--reference-revision {shlex.quote(base.revision)}"] if base.revision else []
    flags += [f"--beta {cell.beta!r}", f"--mechanism-task {cell.task}"]
    flags += [f"--mechanism-temperature {cell.train['temperature']!r}"]
    flags += [f"--mechanism-max-new-tokens {cell.train['max_new_tokens']}"]
    sizes = {"mechanism_prompts": "--mechanism-prompts", "mechanism_samples": "--mechanism-samples"}
    flags += [f"{flag} {EVALUATION[key]}" for key, flag in sizes.items() if key in EVALUATION]
    if cell.train["mixed_precision"] == "bf16-autocast":  # measured as it trained: its products in bfloat16
        flags += ["--mechanism-precision bf16-autocast"]
    return " ".join(flags)


def device(model):
    return "cuda" if job_resources(config, model)["gpus"] else "cpu"


def tracking_options():
    tracking = config.get("tracking", {})
    if not tracking.get("enabled", True):
        return "--off"
    uri = f"--uri {shlex.quote(tracking.get('uri', 'sqlite:///results/mlflow.db'))}"
    return uri + (f" --credentials {shlex.quote(tracking['credentials'])}" if tracking.get("credentials") else "")


def unknown_cell(wildcards):
    """Fails the DAG for a path under results/<experiment>/cells/ of no cell of this config, naming the closest."""
    from klrl.grid.expansion import unknown_cell_message

    raise ValueError(unknown_cell_message(wildcards.unknown_cell, CELLS))


def script_caption(figure):
    """A figure script's docstring: its caption in the report; a script without one is an error naming it."""
    path = Path(f"paper_figures/{figure}.py")
    caption = ast.get_docstring(ast.parse(path.read_text()))
    if not caption:
        raise ValueError(
            f"{path}: no docstring; a figure script's docstring is its caption (what it shows and the claim it tests)"
        )
    return caption


def reconcile_runs(log):
    """End MLflow runs that killed jobs left RUNNING, by what the cells' files say (onstart and
    on exit, see tracking.smk); a failure only warns."""
    shell(
        f"python -m klrl track-reconcile --mlflow-runs {RUNS} --root {LAYOUT.root}"
        " || echo 'klrl track-reconcile failed: MLflow run states left as they were' >&2"
    )


def record_wall_time(outcome):
    """This invocation's wall time since the workflow was read, the jobs it ran and its cores, one
    line of results/<experiment>/wall_times.jsonl (on exit, see tracking.smk)."""
    jobs = len(list(workflow.dag.finished_jobs))
    wall_time.record(
        LAYOUT.wall_times(), STARTED, time.time(), jobs, workflow.global_resources["_cores"].value, outcome
    )
