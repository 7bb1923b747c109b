"""The libraries `klrl audit` knows: an adapter for each that installs beside the project's pins
on a CPU, and for each other the reason in one line."""

from __future__ import annotations

from klrl.audit.gradients import AuditSetting

# Why each library has no adapter: checked against PyPI (versions as of the check) and the
# project's pins (requirements/constraints.txt).
NOT_AUDITED = {
    "verl": "verl 0.9.1 (PyPI) requires transformers<5.11 (the project pins 5.24.0), ray and hydra; its loss module imports them",
    "OpenRLHF": "openrlhf 0.11.2 (PyPI) requires flash-attn 2.8.3 and deepspeed 0.19.6 (CUDA builds) and transformers 5.15.0",
    "SkyRL": "skyrl-train is not on the package index this project installs from (skyrl ≤ 0.3.0 only, the generic API)",
    "slime": "not on PyPI (the PyPI name 'slime' is an unrelated statistics package); installed from its repository with Megatron-LM and SGLang",
    "open-instruct": "not on PyPI; installed from its repository, which pins its own torch, vLLM and flash-attn",
}


def installed_settings() -> list[AuditSetting]:
    """Every setting of every library with an adapter; ValueError naming the package when one is missing."""
    try:
        from klrl.audit import trl_adapter

        return trl_adapter.settings()
    except ImportError as error:
        raise ValueError(
            f"TRL is not installed ({error}); pip install -c requirements/constraints.txt trl==1.16.0"
        ) from None
