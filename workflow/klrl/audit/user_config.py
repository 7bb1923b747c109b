"""A researcher's launch file → which library it is, and why, and the audited setting it states
(`klrl audit --config`), read within the bounds of `klrl.audit.input_limits`.

What the file is:
- YAML or JSON (by its extension): verl's config (keys under `actor_rollout_ref` or `algorithm`,
  nested or dotted; `klrl.audit.verl_config`), OpenRLHF's flags as keys (`algo.*`, `actor.*`;
  `klrl.audit.openrlhf_config`), TRL's GRPOConfig/RLOOConfig fields (`klrl.audit.trl_config`),
  NeMo-RL's config (`grpo`, `loss_fn`, `policy`: refused by name).
- any other file, a shell script (`klrl.audit.shell_script`) whose launch command is verl's
  (`python3 -m verl.trainer.main_ppo`, or `main_ppo.py`, also after `ray job submit … --`: the
  words after it are Hydra overrides), OpenRLHF's (`openrlhf.cli.train_ppo_ray`: its flags),
  NeMo-RL's (`run_grpo*.py`, `nemo_rl`) or slime's (`slime`, or `train.py` with slime's hyphenated
  flags), the last two refused by name; without a launch command, a file of `--flag` words is
  OpenRLHF's and one of `key=value` words verl's overrides. `--library` names the library instead.
A file that is none of these is one line saying what was looked for.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from klrl.audit import openrlhf_config, trl_config, verl_config
from klrl.audit.input_limits import json_mapping, read_text, time_bound, yaml_document
from klrl.audit.libraries import ADAPTERS, NOT_AUDITED
from klrl.audit.reading import Reading
from klrl.audit.shell_script import commands

VERL_COMMAND = re.compile(r"(^|[/.])verl[./]trainer[./]main_ppo(\.py)?$|(^|/)main_ppo\.py$")
OPENRLHF_COMMAND = re.compile(r"openrlhf[./]cli[./]train_ppo_ray(\.py)?$|(^|/)train_ppo_ray\.py$")
NEMO_RL_WORD = re.compile(r"nemo[_-]rl|(^|/)run_(grpo|dpo|sft)\w*\.py$")
SLIME_FLAGS = ("--advantage-estimator", "--kl-loss-type", "--use-kl-loss", "--kl-loss-coef", "--kl-coef")
NEMO_RL_KEYS = ("grpo", "loss_fn", "policy")
LOOKED_FOR = (
    "a `python3 -m verl.trainer.main_ppo` or `openrlhf.cli.train_ppo_ray` command, a file of OpenRLHF --flags "
    "or of verl key=value overrides"
)


def read_config(path: Path, library: str | None = None) -> Reading:
    """The file's library (`library` if given) and the audited setting it states; ValueError: one line."""
    text = read_text(path)
    if path.suffix in (".yaml", ".yml", ".json"):
        reading = _mapping_file(path, text, library)
    else:
        reading = _script(path, text, library)
    if (
        reading.setting is not None
        and reading.setting not in importlib.import_module(ADAPTERS[reading.library][1]).names()
    ):
        raise ValueError(
            f"{path}: {reading.kl}: `{reading.setting}` is not one of {reading.library}'s audited settings "
            f"(`klrl audit --library {reading.library}` lists them)"
        )
    return reading


def _not_audited(path: Path, library: str, why: str) -> ValueError:
    return ValueError(f"{path}: a {library} launch file ({why}): {library} is not audited yet: {NOT_AUDITED[library]}")


def _mapping_file(path: Path, text: str, library: str | None) -> Reading:
    with time_bound(path):
        data, lines = (json_mapping(path, text), {}) if path.suffix == ".json" else yaml_document(path, text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping of config keys")
    heads = {str(key).split(".")[0] for key in data}
    if library is None:
        if len(heads & set(NEMO_RL_KEYS)) >= 2:
            raise _not_audited(path, "NeMo-RL", f"its keys {', '.join(sorted(heads & set(NEMO_RL_KEYS)))}")
        if heads & {"actor_rollout_ref", "algorithm"}:
            library = "verl"
        elif heads & set(openrlhf_config.SECTIONS):
            library = "OpenRLHF"
        else:
            library = "TRL"
    if library == "verl":
        values, notes = verl_config.from_mapping(path, data, lines)
        return verl_config.read(path, values, "a verl config: keys under actor_rollout_ref/algorithm", notes)
    if library == "OpenRLHF":
        values = openrlhf_config.from_mapping(path, data, lines)
        return openrlhf_config.read(path, values, "OpenRLHF's train_ppo_ray flags as keys", [])
    return trl_config.read(path, data, lines)


def _script(path: Path, text: str, library: str | None) -> Reading:
    found = []  # (library, the command word and its line, the words after it)
    with time_bound(path):
        every = commands(path, text)
    for command in every:
        for index, word in enumerate(command):
            if VERL_COMMAND.search(word.text):
                found.append(("verl", word, command[index + 1 :]))
                break
            if OPENRLHF_COMMAND.search(word.text):
                found.append(("OpenRLHF", word, command[index + 1 :]))
                break
            if NEMO_RL_WORD.search(word.text):
                raise _not_audited(path, "NeMo-RL", f"line {word.line}: {word.text}")
            if (
                "slime" in word.text.split("/")
                or word.text.startswith("slime.")
                or (word.text.endswith(("train.py", "train_async.py")) and any(w.text in SLIME_FLAGS for w in command))
            ):
                raise _not_audited(path, "slime", f"line {word.line}: {word.text}")
    if len(found) > 1:
        lines = ", ".join(str(word.line) for _, word, _ in found)
        raise ValueError(f"{path}: {len(found)} launch commands (lines {lines}): one per file")
    if found:
        found_library, word, arguments = found[0]
        if library and library != found_library:
            raise ValueError(f"{path}:{word.line}: {word.text} is {found_library}'s launch command, not {library}'s")
        why = f"line {word.line} runs {word.text}"
    else:
        arguments = [word for command in every for word in command]
        found_library = library or _flags_library(path, arguments)
        why = "a file of its arguments"
    unknown = sorted({u for word in arguments for u in word.unknown})
    notes = [f"not expanded: {u}" for u in unknown]
    if found_library == "verl":
        values = verl_config.from_overrides(path, arguments)
        return verl_config.read(path, values, f"{why}: Hydra overrides", notes)
    if found_library == "OpenRLHF":
        values, more = openrlhf_config.parse(path, arguments)
        return openrlhf_config.read(path, values, f"{why}: train_ppo_ray flags", notes + more)
    raise ValueError(f"{path}: {found_library}'s config is YAML or JSON (.yaml, .yml, .json)")


def _flags_library(path: Path, words) -> str:
    """The library of a file of arguments without a launch command: --flags OpenRLHF's, key=value verl's."""
    if words and all(w.text.startswith("--") or not w.text.startswith("-") for w in words):
        if words[0].text.startswith("--"):
            return "OpenRLHF"
        if all("=" in w.text for w in words):
            return "verl"
    raise ValueError(f"{path}: no launch file recognised: looked for {LOOKED_FOR}")
