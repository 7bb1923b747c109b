"""The guard of the tests that run in a library's audit venv (make test-audit): skipped elsewhere,
an import error there (KLRL_REQUIRE_AUDIT_ENV=1) when the library is missing."""

import importlib
import os

import pytest


def require(module: str):
    """The library's module, or a skip outside its venv."""
    if os.environ.get("KLRL_REQUIRE_AUDIT_ENV"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is in its own venv (make test-audit runs these tests)")
