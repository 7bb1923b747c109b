"""An empty stand-in for flash-attn (CUDA only: it cannot install on a CPU) in .venv-audit-openrlhf.

OpenRLHF's `openrlhf.models` package imports `flash_attn.bert_padding` and
`flash_attn.utils.distributed` at import time (models/ring_attn_utils.py, for packed sequences
and ring attention); the KL code `klrl audit` drives never calls them. Every name here raises
when called, so a call would fail the audit rather than pass unnoticed; tests/audit/test_openrlhf.py
checks that the audited settings run to the end with this package in place.
"""

__version__ = "0.0.0+klrl.stub"
STUB = True


def refuse(name: str):
    """A function named `name` that raises: the audited code path must never reach it."""

    def called(*args, **kwargs):
        raise RuntimeError(
            f"flash_attn.{name} is klrl's empty stand-in (envs/flash_attn_stub): the audited code called it"
        )

    called.__name__ = name.rsplit(".", 1)[-1]
    return called
