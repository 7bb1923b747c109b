"""Fixtures of the evaluation tests: prepared tasks to evaluate on."""

from pathlib import Path

import pytest

from klrl.tasks.data import prepare


@pytest.fixture(scope="session")
def eval_data(tmp_path_factory) -> Path:
    """Prepared in-domain and out-of-domain default tasks, 12 test problems each."""
    root = tmp_path_factory.mktemp("eval-data")
    for task in ("arith", "arith-long"):
        prepare(task, root / task, seed=0, sizes={"train": 16, "test": 12})
    return root
