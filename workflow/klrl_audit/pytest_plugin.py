"""The pytest plugin (entry point `pytest11`, loaded wherever klrl-audit is installed): fixtures giving
`klrl_audit.assert_kl_gradient` and `klrl_audit.audit`, and the toy problem they default to."""

from __future__ import annotations

import pytest

from klrl_audit.toy import ToyProblem, make_problem
from klrl_audit.verdict import assert_kl_gradient as _assert_kl_gradient
from klrl_audit.verdict import audit as _audit


@pytest.fixture
def assert_kl_gradient():
    """`klrl_audit.assert_kl_gradient(loss, target=..., policy=...)`."""
    return _assert_kl_gradient


@pytest.fixture
def kl_audit():
    """`klrl_audit.audit(loss, policy=...)`: the verdict without asserting."""
    return _audit


@pytest.fixture(scope="session")
def kl_toy_problem() -> ToyProblem:
    """The default toy problem (V = 3, T = 4, seed 0; μ = πθ three gradient steps ago)."""
    return make_problem()
