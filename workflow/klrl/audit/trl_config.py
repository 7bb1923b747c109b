"""TRL's trainer config in YAML or JSON → the audited setting it is, by TRL's own config classes
(installed in the project's venv): GRPOConfig or RLOOConfig (a `trainer: grpo|rloo` key, else the
fields only one of them has, else the file's path naming one, as open-r1's `recipes/<model>/grpo/`), with TRL's ModelConfig, ScriptArguments and DatasetMixtureConfig
fields beside them (what `trl grpo --config` reads). A recipe's keys outside these (open-r1's
`reward_funcs`, `system_prompt`, …) are ignored and listed as ignored, except one a letter or two
from a KL field (`use_bias_corection_kl`), refused as the misspelling it likely is.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
from pathlib import Path

from klrl.audit.libraries import make_target
from klrl.audit.reading import TARGETS, Reading

KL_FIELDS = ("trainer", "beta", "loss_type", "use_bias_correction_kl", "importance_sampling_level")
# GRPOTrainer._compute_loss's loss types and importance-sampling levels (its ValueErrors name them)
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo", "cispo", "sapo", "vespo")
IS_LEVELS = ("token", "sequence")
# the loss types that average β·K3 over tokens, per sequence or per batch (grpo_trainer.py:3153-3172 at 1.16.0), whose
# policy term has no gradient at advantages 0: on the toy's fixed-length sequences, dapo's expected gradient
TOKEN_MEAN_LOSS_TYPES = ("grpo", "bnpo", "sapo", "cispo", "vespo")
FIX = "`trainer: rloo` (RLOOConfig, beta > 0: the KL in the reward, TRL's default there)"


def _fields(config) -> dict:
    return {field.name: field.default for field in dataclasses.fields(config)}


def _choice(path: Path, line: int, key: str, value, choices: tuple):
    if value not in choices or isinstance(value, bool) != isinstance(choices[-1], bool):
        raise ValueError(f"{path}:{line}: {key}: {value!r} is not one of {', '.join(map(str, choices))}")
    return value


def read(path: Path, data: dict, key_lines: dict) -> Reading:
    """The Reading of a TRL config's fields."""
    if importlib.util.find_spec("trl") is None:
        raise ValueError(
            f"TRL's config schema (its GRPOConfig, RLOOConfig) is not installed: run `{make_target('TRL')}`"
        )
    import trl

    grpo, rloo = _fields(trl.GRPOConfig), _fields(trl.RLOOConfig)
    known = set(grpo) | set(rloo) | {"trainer"}
    known |= {
        name for config in (trl.ModelConfig, trl.ScriptArguments, trl.DatasetMixtureConfig) for name in _fields(config)
    }
    ignored = []
    for key in data:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), KL_FIELDS, n=1, cutoff=0.85)
        if close:
            raise ValueError(
                f"{path}:{key_lines.get(key, 0)}: {key}: not a field of TRL's GRPOConfig or RLOOConfig (did you mean {close[0]}?)"
            )
        ignored.append(str(key))
    notes = [f"ignored (not a field of TRL's configs): {', '.join(ignored)}"] if ignored else []
    only = {"grpo": sorted(set(data) & (set(grpo) - set(rloo))), "rloo": sorted(set(data) & (set(rloo) - set(grpo)))}
    trainer = data.get("trainer") or next((name for name, keys in only.items() if keys), None)
    named = [name for name in ("grpo", "rloo") if name in f"{path.parent.name}/{path.name}".lower()]
    how = "trainer key" if "trainer" in data else "its fields" if trainer else f"the path names {''.join(named)}"
    if trainer is None and len(named) == 1:  # a recipe's folder or name (open-r1's recipes/<model>/grpo/)
        trainer = named[0]
    if trainer is None:
        raise ValueError(f"{path}: which TRL trainer? add `trainer: grpo` or `trainer: rloo`")
    _choice(path, key_lines.get("trainer", 0), "trainer", trainer, ("grpo", "rloo"))
    other = "rloo" if trainer == "grpo" else "grpo"
    if only[other]:
        key = only[other][0]
        raise ValueError(
            f"{path}:{key_lines.get(key, 0)}: {key}: a field of {other.upper()}Config only, in a {trainer} config"
        )
    why = f"{'GRPOConfig' if trainer == 'grpo' else 'RLOOConfig'} fields: {how}"
    reading = Reading("TRL", why, notes=notes)
    defaults = grpo if trainer == "grpo" else rloo

    def get(key: str, choices: tuple | None = None):
        value, line = data.get(key, defaults[key]), key_lines.get(key, 0) if key in data else 0
        if choices is not None:
            _choice(path, line, key, value, choices)
        reading.keys.append((key, value, line))
        return value

    beta = get("beta")
    if isinstance(beta, bool) or not isinstance(beta, int | float):
        raise ValueError(f"{path}:{key_lines.get('beta', 0)}: beta: {beta!r} is not a number")
    reading.beta = beta
    if beta == 0:
        reading.no_kl = "beta is 0"
        return reading
    from klrl.audit import trl_adapter

    reading.fix = FIX
    if trainer == "rloo":
        if get("normalize_advantages", (False, True)):
            raise ValueError(f"{path}: RLOOConfig normalize_advantages=True: not one of TRL's audited settings")
        reading.kl = f"K1 of the sequence in the reward (RLOO), β = {beta:g}"
        reading.target = TARGETS["k1-reward"]
        reading.setting = trl_adapter.RLOO_SETTING
        return reading
    stated = (
        get("loss_type", LOSS_TYPES),
        get("use_bias_correction_kl", (False, True)),
        get("importance_sampling_level", IS_LEVELS),
    )
    corrected = " weighted by πθ/πold per token (use_bias_correction_kl)" if stated[1] else ""
    reading.kl = f"K3 in the loss{corrected}, aggregated {stated[0]}, β = {beta:g}"
    reading.target = (
        TARGETS["k3-loss-tokis" if stated[1] else "k3-loss"] if stated[2] == "token" else "none the registry names"
    )
    keys = ("loss_type", "use_bias_correction_kl", "importance_sampling_level")
    defaults = stated == tuple(grpo[key] for key in keys)
    if stated[0] in TOKEN_MEAN_LOSS_TYPES and stated[2] == "token":
        reading.notes.append(f"loss_type {stated[0]}: on the toy (fixed length, advantages 0) dapo's row")
        stated, defaults = ("dapo", *stated[1:]), stated[1:] == tuple(grpo[key] for key in keys[1:])
    reading.setting = trl_adapter.grpo_name(*stated, defaults)
    return reading
