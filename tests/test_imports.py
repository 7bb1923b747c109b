"""What the Snakefile imports stays light: building the DAG must not load torch or transformers."""

import subprocess
import sys

import pytest

from klrl.choices import ADVANTAGES, AGGREGATIONS, STANDARD_NAMES, KLConfig


@pytest.mark.parametrize("module", ["klrl.grid", "klrl.choices", "klrl.training.config"])
def test_the_grid_imports_no_torch(module):
    code = f"import sys, {module}; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_choices_are_re_exported_where_they_were():
    from klrl import kl, objectives

    assert kl.KLConfig is KLConfig and kl.STANDARD_NAMES is STANDARD_NAMES
    assert objectives.ADVANTAGES is ADVANTAGES and objectives.AGGREGATIONS is AGGREGATIONS
