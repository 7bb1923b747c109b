"""What the Snakefile imports stays light: building the DAG must not load torch or transformers."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["klrl.grid", "klrl.kl_config", "klrl.estimators", "klrl.training.config"])
def test_the_grid_imports_no_torch(module):
    code = f"import sys, {module}; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
