"""klrl-audit, the distribution of packages/klrl-audit: its wheel, built here offline, holds workflow/klrl_audit
alone, requires torch alone and registers its pytest plugin; its code imports nothing beyond the standard
library and torch (and pytest, in the plugin); the targets it names are the registry's. Its own tests run in a
venv of torch, numpy and pytest alone (make test-audit)."""

import ast
import shutil
import subprocess
import sys
import zipfile

import klrl_audit
import pytest
from audit.readme_examples import example
from klrl.objective import estimators
from klrl_audit import targets


def test_its_wheel_requires_torch_alone_and_registers_its_plugin(repo_root, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(repo_root / "packages" / "klrl-audit", tree / "packages" / "klrl-audit")
    shutil.copytree(repo_root / "workflow" / "klrl_audit", tree / "workflow" / "klrl_audit")
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*command, "-w", str(tmp_path), str(tree / "packages" / "klrl-audit")], check=True)
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name == f"klrl_audit-{klrl_audit.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = f"klrl_audit-{klrl_audit.__version__}.dist-info/"
        fields = [line.split(": ", 1) for line in archive.read(info + "METADATA").decode().splitlines() if ": " in line]
        entry_points = archive.read(info + "entry_points.txt").decode()
    modules = sorted(path.name for path in (repo_root / "workflow" / "klrl_audit").glob("*.py"))
    assert sorted(name.removeprefix("klrl_audit/") for name in names if not name.startswith(info)) == modules
    assert [value for key, value in fields if key == "Requires-Dist"] == ["torch>=2.1"]
    assert "[pytest11]\nklrl_audit = klrl_audit.pytest_plugin\n" in entry_points


def test_its_code_imports_the_standard_library_and_torch_alone(repo_root):
    for path in (repo_root / "workflow" / "klrl_audit").glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
        allowed = (
            set(sys.stdlib_module_names)
            | {"torch", "klrl_audit"}
            | ({"pytest"} if path.stem == "pytest_plugin" else set())
        )
        assert imported <= allowed, (path.name, imported - allowed)


def test_its_targets_are_the_registrys():
    named = (estimators.SEQUENCE_REVERSE_KL, estimators.TOKEN_REVERSE_KL, estimators.TOKEN_FORWARD_KL, estimators.ZERO)
    assert tuple(klrl_audit.TARGETS) == named
    assert targets.OTHER == estimators.OTHER


@pytest.mark.slow
def test_the_trl_example_of_the_maintainers_page():
    """klrl-audit's TRL example runs as written, on a GRPOTrainer of β = 1 built as klrl audit builds one."""
    pytest.importorskip("trl")
    from klrl.audit.trl_adapter import grpo_config, grpo_trainer
    from klrl_audit import assert_kl_gradient

    example("TRL")["test_grpo_kl_gradient"](grpo_trainer(grpo_config()), assert_kl_gradient)
