"""The libraries `klrl audit` knows: an adapter for each that installs on a CPU, in the project's
venv (TRL) or in an environment of its own (`make audit-env LIBRARY=...`), and for each other
the reason in one line.

A library with an environment of its own is audited there: `library_rows` runs
`python -m klrl.audit.worker` with that environment's interpreter and this checkout's klrl on
its path, and reads back its rows (a JSON file: the libraries print to stdout as they import),
every setting's or, for `klrl audit --config`, those it reports on one named setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# library -> (the module it imports, its adapter, its environment under the repository root; None: the project's venv)
ADAPTERS = {
    "TRL": ("trl", "klrl.audit.trl_adapter", None),
    "verl": ("verl", "klrl.audit.verl_adapter", ".venv-audit-verl"),
    "OpenRLHF": ("openrlhf", "klrl.audit.openrlhf_adapter", ".venv-audit-openrlhf"),
}
REPO_ROOT = Path(__file__).resolve().parents[3]
USER_ERROR = 2  # the worker's exit status for a ValueError: its message is the user's, passed on as it is

# Why each library has no adapter: checked against PyPI (versions as of the check) and the
# project's pins (requirements/constraints.txt).
NOT_AUDITED = {
    "NeMo-RL": "nemo-rl on PyPI is a 0.0.0 placeholder without code (its summary says so); the library installs from its repository only",
    "SkyRL": "skyrl-train is not on the package index this project installs from (skyrl ≤ 0.3.0 only, the generic API)",
    "slime": "not on PyPI (the PyPI name 'slime' is an unrelated statistics package); installed from its repository with Megatron-LM and SGLang",
    "open-instruct": "not on PyPI; installed from its repository, which pins its own torch, vLLM and flash-attn",
}


def make_target(library: str) -> str:
    """The make target that installs the library where `klrl audit` looks for it."""
    return "make install" if ADAPTERS[library][2] is None else f"make audit-env LIBRARY={library.lower()}"


def library_name(name: str) -> str:
    """The library as ADAPTERS spells it, from any case; ValueError naming the choices."""
    for library in ADAPTERS:
        if library.lower() == name.lower():
            return library
    raise ValueError(f"--library: {name!r} is not one of {', '.join(ADAPTERS)}")


def settings_here(library: str) -> list:
    """The library's settings from this interpreter; ValueError naming the target when it is not installed."""
    import importlib

    module, adapter, _ = ADAPTERS[library]
    if importlib.util.find_spec(module) is None:
        raise ValueError(f"{library} is not installed in {sys.prefix}: run `{make_target(library)}`")
    return importlib.import_module(adapter).settings()


def rows_here(library: str, vocab: int, horizon: int, seed: int, setting: str | None = None) -> list[dict]:
    """The library's audit rows from this interpreter: every setting's, or those `klrl audit --config`
    reports on one setting (`gradients.setting_rows`)."""
    from klrl.audit.gradients import audit_rows, setting_rows

    settings = settings_here(library)
    if setting is None:
        return audit_rows(settings, vocab, horizon, seed)
    return setting_rows(settings, setting, vocab, horizon, seed)


def library_rows(library: str, vocab: int, horizon: int, seed: int, setting: str | None = None) -> list[dict]:
    """The library's audit rows (`rows_here`): here if it is installed here, else in its own environment."""
    import importlib.util

    module, _, environment = ADAPTERS[library]
    if environment is None or importlib.util.find_spec(module) is not None:
        return rows_here(library, vocab, horizon, seed, setting)
    python = REPO_ROOT / environment / "bin" / "python"
    if not python.exists():
        raise ValueError(f"{library}'s audit environment {environment} is missing: run `{make_target(library)}`")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "rows.json"
        command = [str(python), "-m", "klrl.audit.worker", library, str(vocab), str(horizon), str(seed), str(out)]
        env = os.environ | {"PYTHONPATH": str(REPO_ROOT / "workflow")}
        done = subprocess.run(
            command + ([setting] if setting else []), capture_output=True, text=True, env=env, check=False
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ValueError(
                last if done.returncode == USER_ERROR else f"{library}'s audit in {environment} failed: {last}"
            )
        return json.loads(out.read_text())
