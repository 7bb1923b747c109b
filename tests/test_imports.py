"""What the Snakefile imports stays light: building the DAG must not load torch or transformers; a
single-process train job does not load the distributed checkpointing it does not use, nor the
other ranks of a torchrun job MLflow."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "klrl.grid.expansion",
        "klrl.grid.gpu_leases",
        "klrl.grid.leased_run",
        "klrl.objective.kl_config",
        "klrl.objective.estimators",
        "klrl.training.config",
    ],
)
def test_the_grid_imports_no_torch(module):
    code = f"import sys, {module}; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_a_single_process_trainer_does_not_import_distributed_checkpointing():
    """torch.distributed.checkpoint costs about 0.8 s per train job; only sharded models need it."""
    code = "import sys, klrl.training.trainer; print('torch.distributed.checkpoint' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.slow
def test_a_train_jobs_other_ranks_do_not_import_mlflow(tmp_path):
    """Rank 0 alone logs to MLflow (Trainer); the import costs the other ranks of a torchrun job
    about 2.5 s of CPU each."""
    runs = tmp_path / "runs.json"
    runs.write_text('{"tracking_uri": "http://127.0.0.1:1", "experiment_id": "1", "runs": {"c": "r"}}')
    code = f"""
import os, sys, types, klrl.training.trainer, klrl.verbs.train
from pathlib import Path
os.environ["RANK"] = "1"
class Trainer:
    def __init__(self, config, out, tracker):
        self.got, self.procs = tracker, types.SimpleNamespace(is_main=False, world=2)
    def run(self):
        return "completed"
    def close(self):
        print(self.got, "mlflow" in sys.modules)
klrl.training.trainer.Trainer = Trainer
overrides = ["base_model=b", "train_data=d", "eval_data=e", "reward=math"]
args = types.SimpleNamespace(config=None, overrides=overrides, out=Path({str(tmp_path / "train")!r}),
                             mlflow_runs=Path({str(runs)!r}), mlflow_key="c", mlflow_run_id=None)
klrl.verbs.train.run(args)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "None False"), done.stderr[-2000:]
