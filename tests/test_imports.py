"""What the Snakefile imports stays light: building the DAG must not load torch or transformers; a
single-process train job does not load the distributed checkpointing it does not use."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "klrl.grid.expansion",
        "klrl.grid.gpu_leases",
        "klrl.objective.kl_config",
        "klrl.objective.estimators",
        "klrl.training.config",
    ],
)
def test_the_grid_imports_no_torch(module):
    code = f"import sys, {module}; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_single_process_trainer_does_not_import_distributed_checkpointing():
    """torch.distributed.checkpoint costs about 0.8 s per train job; only sharded models need it."""
    code = "import sys, klrl.training.trainer; print('torch.distributed.checkpoint' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
