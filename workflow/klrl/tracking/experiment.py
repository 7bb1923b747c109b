"""`klrl track-grid`: the MLflow side of a grid, created once before any job runs.

One experiment per config file, named `klrl-<experiment>` (never to be confused with MLflow's
built-in `Default`) and tagged `mlflow.experimentKind: custom_model_development`, so that MLflow's
UI (3.x) opens it on its runs table rather than on the GenAI traces overview. In it a parent run
`grid` and, as its children
(`mlflow.parentRunId`), one run per cell and one per base model (`base/<model>`), SCHEDULED
until its job starts (a cell's: klrl.tracking.attempt_runs), tagged with
model, KL configuration, β, policy mode and seed, and the git commit of the code
(`mlflow.source.git.commit`). Jobs then only log into their run, found in
the runs file this writes (`klrl.tracking.runs.Tracker.from_runs_file`). Creating the store, the experiment and
the runs here, in one process, avoids SQLite's failure on concurrent first use and the race of
parallel experiment creation. Runs that exist (matched by their `klrl.key` tag, superseded
attempts' runs left out: klrl.tracking.attempt_runs) are kept, so re-running after the grid grows
adds only the new cells' runs.

The store is MLFLOW_TRACKING_URI when set, else the config's `tracking.uri`; artifacts of a
new experiment go under results/mlartifacts/<experiment>. An authenticated server's credentials
file (KLRL_TRACKING_CREDENTIALS, else `tracking.credentials`) is named in the runs file, by its
path alone: every job that reads the runs file authenticates with it (klrl.tracking.credentials). With tracking off the runs file
says so and every job's tracker is a no-op.
"""

from __future__ import annotations

import json
from pathlib import Path

from klrl.core.files import write_atomic
from klrl.tracking.credentials import use_credentials
from klrl.tracking.runs import KEY_TAG, run_tags, source_commit

EXPERIMENT_PREFIX = "klrl-"
# The experiment tag MLflow's UI reads to choose its layout; this value opens the runs table.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
ARTIFACTS = Path("results") / "mlartifacts"


def mlflow_experiment_name(experiment: str) -> str:
    """The MLflow experiment of a config's `experiment`.

    >>> mlflow_experiment_name("default")
    'klrl-default'
    """
    return f"{EXPERIMENT_PREFIX}{experiment}"


def _experiment_id(client, name: str, uri: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        for key, value in EXPERIMENT_KIND.items():
            if experiment.tags.get(key) != value:
                client.set_experiment_tag(experiment.experiment_id, key, value)
        return experiment.experiment_id
    location = None
    if uri.startswith("sqlite:") or "://" not in uri:
        location = (ARTIFACTS / name).resolve().as_uri()
    return client.create_experiment(name, artifact_location=location, tags=EXPERIMENT_KIND)


def _existing_runs(client, experiment_id: str) -> dict[str, str]:
    runs, token = {}, None
    while True:
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        current = (run for run in page if KEY_TAG in run.data.tags and "klrl.superseded_by" not in run.data.tags)
        runs |= {run.data.tags[KEY_TAG]: run.info.run_id for run in current}
        token = page.token
        if not token:
            return runs


def track_grid(
    experiment: str,
    uri: str | None,
    keys: list[str],
    out: Path,
    groups: dict[str, str],
    credentials: Path | None = None,
) -> dict:
    """Create what is missing, authenticated by the credentials file `credentials` when given;
    write and return the runs file {tracking_uri, experiment_id, runs, credentials}."""
    if not uri:
        record = {"tracking_uri": None, "experiment_id": None, "runs": {}, "credentials": None}
    else:
        from mlflow.tracking import MlflowClient

        use_credentials(credentials)

        if uri.startswith("sqlite:///"):
            Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        client = MlflowClient(uri)
        experiment_id = _experiment_id(client, mlflow_experiment_name(experiment), uri)
        runs = _existing_runs(client, experiment_id)
        commit = {"mlflow.source.git.commit": commit} if (commit := source_commit()) else {}
        if "grid" not in runs:
            runs["grid"] = client.create_run(
                experiment_id, run_name="grid", tags={KEY_TAG: "grid"} | commit
            ).info.run_id
        for key in keys:
            if key not in runs:
                tags = run_tags(key) | {KEY_TAG: key, "mlflow.parentRunId": runs["grid"]} | commit
                if key in groups:
                    tags["group"] = groups[key]
                runs[key] = client.create_run(experiment_id, run_name=key, tags=tags).info.run_id
                client.update_run(runs[key], status="SCHEDULED")  # RUNNING once its job starts
        record = {
            "tracking_uri": uri,
            "experiment_id": experiment_id,
            "runs": runs,
            "credentials": str(credentials) if credentials else None,
        }
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(record, indent=2) + "\n")
    return record
