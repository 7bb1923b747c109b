"""Where klrl-audit is installed (make test-audit's .venv-audit-lib: a venv of torch, numpy and pytest, then
klrl-audit from the repository): it brought nothing else, its pytest plugin is registered by entry point,
and its version is the package's. Skipped where it is not installed, unless KLRL_REQUIRE_AUDIT_ENV is set."""

import os
import re
from importlib import metadata

import pytest

import klrl_audit


@pytest.fixture(scope="module")
def distribution():
    try:
        return metadata.distribution("klrl-audit")
    except metadata.PackageNotFoundError:
        if os.environ.get("KLRL_REQUIRE_AUDIT_ENV"):
            raise
        pytest.skip("klrl-audit is not installed here (make test-audit installs it in .venv-audit-lib)")


def _name(requirement: str) -> str:
    return re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(names: set[str]) -> set[str]:
    """The distributions `names` need, theirs included (requirements without an extra or a marker this
    interpreter fails)."""
    from packaging.requirements import Requirement

    needed, todo = set(), set(names)
    while todo:
        name = todo.pop()
        needed.add(name)
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo |= {_name(text)} - needed
    return needed


def test_it_needs_torch_alone(distribution):
    assert [_name(text) for text in distribution.requires] == ["torch"]
    assert distribution.version == klrl_audit.__version__


def test_it_brought_nothing_else(distribution):
    installed = {_name(dist.metadata["Name"]) for dist in metadata.distributions()}
    venv = {"pip", "setuptools", "wheel"}  # what the venv came with
    assert installed - venv == (_closure({"torch", "numpy", "pytest"}) | {"klrl-audit"}) - venv


def test_its_plugin_is_registered_by_entry_point(distribution, pytestconfig):
    (entry,) = [entry for entry in distribution.entry_points if entry.group == "pytest11"]
    assert entry.value == "klrl_audit.pytest_plugin"
    assert pytestconfig.pluginmanager.get_plugin(entry.name) is not None
