# Input functions and the expanded grid; the expansion and its checks are klrl.grid's.
import shlex

from klrl.grid import base_eval_tasks, eval_job_resources, expand_grid, job_resources, model_path, train_launcher, used_tasks
from klrl.models import get_base_model

CELLS = expand_grid(config)
BASE_TASKS = base_eval_tasks(CELLS)
TASKS = used_tasks(CELLS)
RUNS = f"results/mlflow/{config['experiment']}.runs.json"
EVALUATION = config["evaluation"]


wildcard_constraints:
    cell="|".join(CELLS),
    model="|".join(BASE_TASKS),
    task="|".join(TASKS),


def base_model_input(model):
    """The built base model's config.json, or nothing for a Hub model (downloaded by the job)."""
    if get_base_model(model).build == "hub":
        return []
    return f"results/base/{model}/model/config.json"


def data_inputs(tasks):
    return [f"results/data/{task}/manifest.json" for task in tasks]


def train_settings(cell):
    """`--set key=value` arguments for every TrainConfig value of the cell, shell-quoted."""
    pairs = sorted(CELLS[cell].train.items())
    return " ".join(f"--set {shlex.quote(f'{key}={value}')}" for key, value in pairs)


def data_options(task):
    options = config["data"].get(task, {})
    flags = {"train_size": "--train-size", "test_size": "--test-size", "seed": "--seed", "source": "--source"}
    flags["instruction"] = "--instruction"
    return " ".join(f"{flags[key]} {shlex.quote(str(value))}" for key, value in sorted(options.items()))


def pretrain_options(model):
    options = config.get("models", {}).get(model, {}).get("pretrain", {})
    return " ".join(f"--{key.replace('_', '-')} {value}" for key, value in sorted(options.items()))


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
