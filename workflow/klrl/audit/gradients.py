"""Each audited library setting's rows: its exact expected gradient on the toy policy (`klrl_audit.audit`),
the target it equals and its bias, on-policy, off-policy and under an engine mismatch.

An `AuditSetting` is one KL setting of one library: a function from a `klrl_audit.GroupBatch` (the
tensors a trainer holds for a batch of groups of 2 sequences, the task reward 0) to the library's
own loss, with β = 1. klrl_audit computes its expectation exactly (`method: exact`; its module
docstrings say how) and names the gradient it equals (`estimates`): the sequence's reverse KL's,
the per-token reverse or forward KL's (the targets `klrl.objective.estimators` names), `zero`, or
`other`; `rel_bias` = ‖E[ĝ] − ∇KL‖/‖∇KL‖ as in the toy table. A library that averages its KL term
over tokens has its gradient multiplied by T (every toy sequence has T tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from klrl.objective.estimators import SEQUENCE_REVERSE_KL
from klrl.toy.bias import LAG_STEPS
from klrl_audit import POLICIES, GroupBatch, audit, make_problem
from klrl_audit.toy import total_variation

COLUMNS = (
    "library",
    "version",
    "setting",
    "mode",
    "method",
    "estimates",
    "rel_bias",
    "lag",
    "tv",
    "vocab",
    "horizon",
    "seed",
)


@dataclass(frozen=True)
class AuditSetting:
    library: str
    version: str
    name: str  # the setting in the library's own terms
    loss: Callable[[GroupBatch], torch.Tensor]  # the library's loss on the batch, β = 1
    tokens_averaged: bool  # the library averages the KL term over tokens (its gradient is multiplied by T)


def audit_rows(
    settings: list[AuditSetting], vocab: int = 3, horizon: int = 4, seed: int = 0, modes: tuple[str, ...] = POLICIES
) -> list[dict]:
    """One row per setting and mode (columns COLUMNS), on the toy problem of `klrl toy-bias`."""
    problem = make_problem(vocab, horizon, seed, lag_steps=LAG_STEPS)
    tv = total_variation(problem)
    rows = []
    for setting in settings:
        for mode in modes:
            verdict = audit(setting.loss, mode, problem, setting.tokens_averaged)
            rows.append(
                {
                    "library": setting.library,
                    "version": setting.version,
                    "setting": setting.name,
                    "mode": mode,
                    "method": "exact",
                    "estimates": verdict.follows,
                    "rel_bias": verdict.bias,
                    "lag": LAG_STEPS,
                    "tv": tv,
                    "vocab": vocab,
                    "horizon": horizon,
                    "seed": seed,
                }
            )
    return rows


def setting_rows(
    settings: list[AuditSetting], name: str, vocab: int = 3, horizon: int = 4, seed: int = 0
) -> list[dict]:
    """The rows `klrl audit --config` reports on the setting `name`: its own in every mode, every other
    setting's on-policy, and every mode of those whose on-policy gradient is the sequence's reverse KL's."""
    if name not in {setting.name for setting in settings}:
        library = settings[0].library
        raise ValueError(
            f"{name!r} is not one of {library}'s audited settings (`klrl audit --library {library}` lists them)"
        )
    on = audit_rows(settings, vocab, horizon, seed, modes=("on",))
    unbiased = {row["setting"] for row in on if row["estimates"] == SEQUENCE_REVERSE_KL} | {name}
    chosen = [setting for setting in settings if setting.name in unbiased]
    return on + audit_rows(chosen, vocab, horizon, seed, modes=("off", "mismatch"))
