"""A user's own config file of TRL, verl or OpenRLHF → the library and the audited setting it is
(`klrl audit --config`), by the library's own schema.

- TRL: its trainer config's fields in YAML or JSON (GRPOConfig or RLOOConfig: a `trainer: grpo|rloo`
  key, else the fields only one of them has). Every key must be a field of GRPOConfig, RLOOConfig
  or TRL's ModelConfig, ScriptArguments or DatasetMixtureConfig (what `trl grpo --config` reads).
- verl: its Hydra YAML (or JSON). Keys under `actor_rollout_ref.actor` and `algorithm` must be in
  the installed verl's `trainer/config/_generated_ppo_trainer.yaml`, whose values fill in the
  keys the file leaves out; the other sections are not read.
- OpenRLHF: the arguments of `openrlhf.cli.train_ppo_ray` (a shell script running it, or a text
  of `--flag value` tokens; or the same keys in YAML/JSON), parsed by OpenRLHF's own argparse
  parser, built from the installed `cli/train_ppo_ray.py` without importing it (which starts
  ray). An unknown `--algo.*` or `--actor.*` flag is an error, other unknown flags are ignored.
YAML/JSON files are read by their extension (.yaml, .yml, .json), any other file as flags; the
library comes from the keys (verl: `actor_rollout_ref` or `algorithm`; OpenRLHF: `algo.*` or
`actor.*`; else TRL) unless given. Keys that do not concern the KL are not read; a KL key's value
outside the library's choices, a key the schema lacks, a file that does not parse, and a
configuration no audited setting is, are each a ValueError naming the file (and the line where
the parser gives one).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import importlib.util
import json
import shlex
from pathlib import Path
from typing import NamedTuple, NoReturn

from klrl.audit.libraries import ADAPTERS, REPO_ROOT, make_target

VERL_SCHEMA = "verl/trainer/config/_generated_ppo_trainer.yaml"
VERL_SECTIONS = ("actor_rollout_ref.actor", "algorithm")
# kl_loss_type and kl_penalty: what verl's core_algos.kl_penalty_forward dispatches on, each also
# with "+" (kl_penalty's straight-through k2 gradient); loss_agg_mode: ActorConfig's valid modes
VERL_KL_TYPES = tuple(
    kind + plus for plus in ("", "+") for kind in ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")
)
VERL_LOSS_AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)
VERL_ROLLOUT_IS = (None, "token", "sequence")  # rollout_corr_helper's levels; None: no correction
OPENRLHF_CLI = "openrlhf/cli/train_ppo_ray.py"
OPENRLHF_SECTIONS = ("algo", "actor")  # the argument groups that hold the KL's flags
# GRPOTrainer._compute_loss's loss types and importance-sampling levels (its ValueErrors name them)
TRL_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo", "cispo", "sapo", "vespo")
TRL_IS_LEVELS = ("token", "sequence")
SHELL_OPERATORS = {"&&", "||", "|", ";", "&", ">", ">>", "2>&1"}


class UserSetting(NamedTuple):
    library: str
    setting: str | None  # the audited setting's name, as in the audit table; None: no KL term
    no_kl: str = ""  # why the file applies no KL term (setting None)


def read_setting(path: Path, library: str | None = None) -> UserSetting:
    """The library (`library` if given) and the audited setting the config file states."""
    text = path.read_text()
    if path.suffix in (".yaml", ".yml", ".json"):
        source = _mapping(path, text)
        library = library or _which_library(source)
    else:
        library = library or "OpenRLHF"
        if library != "OpenRLHF":
            raise ValueError(f"{path}: {library}'s config is YAML or JSON (.yaml, .yml, .json); flags are OpenRLHF's")
        source = _flag_tokens(path, text)
    return {"TRL": _trl, "verl": _verl, "OpenRLHF": _openrlhf}[library](path, source)


def _mapping(path: Path, text: str) -> dict:
    import yaml

    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not valid JSON: {error.msg}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ValueError(f"{where}: not valid YAML: {getattr(error, 'problem', None) or error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping of config keys")
    return data


def _which_library(data: dict) -> str:
    if "actor_rollout_ref" in data or "algorithm" in data:
        return "verl"
    if any(str(key).split(".")[0] in OPENRLHF_SECTIONS for key in data):
        return "OpenRLHF"
    return "TRL"


def _package_file(library: str, relative: str) -> Path:
    """A file of the installed library: in this interpreter's packages, else in its audit environment."""
    module, _, environment = ADAPTERS[library]
    spec = importlib.util.find_spec(module)
    if spec is not None:
        roots = [Path(location).parent for location in spec.submodule_search_locations]
    else:
        roots = sorted((REPO_ROOT / environment).glob("lib/python*/site-packages")) if environment else []
    for root in roots:
        if (root / relative).is_file():
            return root / relative
    raise ValueError(f"{library}'s config schema ({relative}) is not installed: run `{make_target(library)}`")


def _choice(path: Path, key: str, value, choices: tuple):
    if value not in choices or isinstance(value, bool) != isinstance(choices[-1], bool):
        shown = ", ".join("null" if choice is None else str(choice) for choice in choices)
        raise ValueError(f"{path}: {key}: {value!r} is not one of {shown}")
    return value


def _number(path: Path, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{path}: {key}: {value!r} is not a number")
    return value


def _not_audited(path: Path, library: str, what: str) -> NoReturn:
    raise ValueError(
        f"{path}: {what}: not one of {library}'s audited settings (`klrl audit --library {library}` lists them)"
    )


# --- TRL


def _trl(path: Path, data: dict) -> UserSetting:
    if importlib.util.find_spec("trl") is None:
        raise ValueError(
            f"TRL's config schema (its GRPOConfig, RLOOConfig) is not installed: run `{make_target('TRL')}`"
        )
    import trl

    def fields(config) -> dict:
        return {field.name: field.default for field in dataclasses.fields(config)}

    grpo, rloo = fields(trl.GRPOConfig), fields(trl.RLOOConfig)
    known = set(grpo) | set(rloo) | {"trainer"}
    known |= {
        name for config in (trl.ModelConfig, trl.ScriptArguments, trl.DatasetMixtureConfig) for name in fields(config)
    }
    for key in data:
        if key not in known:
            raise ValueError(
                f"{path}: {key}: not a field of TRL's GRPOConfig, RLOOConfig, ModelConfig or ScriptArguments"
            )
    only = {"grpo": sorted(set(data) & (set(grpo) - set(rloo))), "rloo": sorted(set(data) & (set(rloo) - set(grpo)))}
    trainer = data.get("trainer") or next((name for name, keys in only.items() if keys), None)
    if trainer is None:
        raise ValueError(f"{path}: which TRL trainer? add `trainer: grpo` or `trainer: rloo`")
    _choice(path, "trainer", trainer, ("grpo", "rloo"))
    other = "rloo" if trainer == "grpo" else "grpo"
    if only[other]:
        raise ValueError(f"{path}: {only[other][0]}: a field of {other.upper()}Config only, in a {trainer} config")
    defaults = grpo if trainer == "grpo" else rloo
    value = {key: data.get(key, default) for key, default in defaults.items()}
    if _number(path, "beta", value["beta"]) == 0:
        return UserSetting("TRL", None, "beta is 0")
    from klrl.audit import trl_adapter

    if trainer == "rloo":
        if _choice(path, "normalize_advantages", value["normalize_advantages"], (False, True)):
            _not_audited(path, "TRL", "RLOOConfig normalize_advantages=True")
        return UserSetting("TRL", trl_adapter.RLOO_SETTING)
    stated = (
        _choice(path, "loss_type", value["loss_type"], TRL_LOSS_TYPES),
        _choice(path, "use_bias_correction_kl", value["use_bias_correction_kl"], (False, True)),
        _choice(path, "importance_sampling_level", value["importance_sampling_level"], TRL_IS_LEVELS),
    )
    keys = ("loss_type", "use_bias_correction_kl", "importance_sampling_level")
    return UserSetting("TRL", trl_adapter.grpo_name(*stated, stated == tuple(grpo[key] for key in keys)))


# --- verl


def _verl(path: Path, data: dict) -> UserSetting:
    import yaml

    schema_file = _package_file("verl", VERL_SCHEMA)
    schema = yaml.safe_load(schema_file.read_text())
    for section in VERL_SECTIONS:
        _known_keys(path, _at(data, section), _at(schema, section), section, schema_file)

    def get(key: str):
        value = _at(data, key)
        return _at(schema, key) if value is _MISSING else value

    def boolean(key: str) -> bool:
        return _choice(path, key, get(key), (False, True))

    actor, algorithm = "actor_rollout_ref.actor.", "algorithm."
    in_loss, in_reward = boolean(actor + "use_kl_loss"), boolean(algorithm + "use_kl_in_reward")
    if in_loss and in_reward:
        _not_audited(
            path, "verl", f"{actor}use_kl_loss and {algorithm}use_kl_in_reward both true (verl applies both KL terms)"
        )
    if not (in_loss or in_reward):
        return UserSetting("verl", None, f"{actor}use_kl_loss and {algorithm}use_kl_in_reward are false")
    loss_agg_mode = _choice(path, actor + "loss_agg_mode", get(actor + "loss_agg_mode"), VERL_LOSS_AGG_MODES)
    from klrl.audit import verl_adapter

    if in_loss:
        if _number(path, actor + "kl_loss_coef", get(actor + "kl_loss_coef")) == 0:
            return UserSetting("verl", None, f"{actor}kl_loss_coef is 0")
        kl_loss_type = _choice(path, actor + "kl_loss_type", get(actor + "kl_loss_type"), VERL_KL_TYPES)
        return UserSetting("verl", verl_adapter.loss_name(kl_loss_type, loss_agg_mode))
    if _number(path, algorithm + "kl_ctrl.kl_coef", get(algorithm + "kl_ctrl.kl_coef")) == 0:
        return UserSetting("verl", None, f"{algorithm}kl_ctrl.kl_coef is 0")
    kl_penalty = _choice(path, algorithm + "kl_penalty", get(algorithm + "kl_penalty"), VERL_KL_TYPES)
    rollout_is = _choice(
        path,
        algorithm + "rollout_correction.rollout_is",
        get(algorithm + "rollout_correction.rollout_is"),
        VERL_ROLLOUT_IS,
    )
    for key, audited in (("loss_agg_mode", "token-mean"), ("policy_loss.loss_mode", "vanilla")):
        if get(actor + key) != audited:  # the policy term the reward rows run
            _not_audited(
                path, "verl", f"{actor}{key}={get(actor + key)} with the KL in the reward (audited: {audited})"
            )
    name = verl_adapter.reward_name(
        kl_penalty, get(algorithm + "adv_estimator"), boolean(algorithm + "norm_adv_by_std_in_grpo"), rollout_is
    )
    return UserSetting("verl", name)


_MISSING = object()


def _at(mapping, dotted: str):
    """The value at a dotted key of nested mappings, or _MISSING."""
    for part in dotted.split("."):
        if not isinstance(mapping, dict) or part not in mapping:
            return _MISSING
        mapping = mapping[part]
    return mapping


def _known_keys(path: Path, given, schema, where: str, schema_file: Path) -> None:
    """Every key of `given` is in `schema`, recursively where the schema has keys of its own."""
    if not isinstance(given, dict) or not isinstance(schema, dict) or not schema:
        return
    for key, value in given.items():
        if key not in schema:
            raise ValueError(f"{path}: {where}.{key}: not a key of verl's config ({schema_file.name})")
        _known_keys(path, value, schema[key], f"{where}.{key}", schema_file)


# --- OpenRLHF


def _flag_tokens(path: Path, text: str) -> list[str]:
    """The arguments of the file's train_ppo_ray command, or every token of a file of flags."""
    commands, words, start = [], [], 1
    logical = ""
    for number, line in enumerate(text.splitlines(), 1):
        if not logical:
            start = number
        logical += line[:-1] + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        try:
            tokens = shlex.split(logical, comments=True)
        except ValueError as error:
            raise ValueError(f"{path}:{start}: not valid shell words: {error}") from None
        logical = ""
        words += tokens
        for index, token in enumerate(tokens):
            if token.endswith(("openrlhf.cli.train_ppo_ray", "train_ppo_ray.py")):
                after = tokens[index + 1 :]
                cut = next((i for i, word in enumerate(after) if word in SHELL_OPERATORS), len(after))
                commands.append(after[:cut])
    if len(commands) > 1:
        raise ValueError(f"{path}: {len(commands)} train_ppo_ray commands: one per file")
    if commands:
        return commands[0]
    if not any(word.startswith("--") for word in words):
        raise ValueError(f"{path}: neither an openrlhf.cli.train_ppo_ray command nor --flag tokens")
    return words


def openrlhf_parser() -> argparse.ArgumentParser:
    """OpenRLHF's own argparse parser: the statements of train_ppo_ray.py's main block before its
    parse_args, from the installed file (importing the module imports ray)."""
    cli = _package_file("OpenRLHF", OPENRLHF_CLI)
    tree = ast.parse(cli.read_text(), str(cli))
    (main,) = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
    body = []
    for statement in main.body:
        if "parse_args" in ast.unparse(statement):
            break
        body.append(statement)
    namespace = {"argparse": argparse, "datetime": datetime.datetime}
    exec(compile(ast.Module(body, type_ignores=[]), str(cli), "exec"), namespace)
    return namespace["parser"]


def _yaml_flags(path: Path, parser: argparse.ArgumentParser, data: dict, prefix: str = "") -> list[str]:
    """OpenRLHF's keys in YAML (nested or dotted) as the flags they stand for."""
    tokens = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if value is None:  # the flag's default
            continue
        if isinstance(value, dict):
            tokens += _yaml_flags(path, parser, value, name + ".")
            continue
        action = parser._option_string_actions.get("--" + name)
        if action is None:
            tokens.append("--" + name)  # judged with the file's other unknown flags
        elif action.nargs == 0:
            if _choice(path, name, value, (False, True)) == action.const:
                tokens.append("--" + name)
        else:
            tokens += ["--" + name, *map(str, value if isinstance(value, list) else [value])]
    return tokens


def _openrlhf(path: Path, source) -> UserSetting:
    parser = openrlhf_parser()

    def error(message: str):
        raise ValueError(f"{path}: {message}")

    parser.error = error
    tokens = _yaml_flags(path, parser, source) if isinstance(source, dict) else source
    args, unknown = parser.parse_known_args(tokens)
    for token in unknown:
        if token.startswith(tuple(f"--{section}." for section in OPENRLHF_SECTIONS)):
            error(f"{token.split('=')[0]}: not an argument of OpenRLHF's {Path(OPENRLHF_CLI).name}")
    value = vars(args)
    if value["algo.kl.init_coef"] == 0:
        return UserSetting("OpenRLHF", None, "--algo.kl.init_coef is 0")
    from klrl.audit import openrlhf_adapter

    estimator, loss_agg_mode = value["algo.kl.estimator"], value["actor.loss_agg_mode"]
    if value["algo.kl.use_loss"]:
        return UserSetting(
            "OpenRLHF", openrlhf_adapter.loss_name(estimator, value["algo.kl.unbiased_gradient"], loss_agg_mode)
        )
    audited = {
        "--algo.advantage.estimator": openrlhf_adapter.REWARD_ESTIMATORS,
        "--actor.policy_loss_type": ("ppo",),
        "--actor.loss_agg_mode": ("token-mean",),
    }
    for flag, choices in audited.items():  # the policy term the reward rows run
        if value[flag[2:]] not in choices:
            what = f"{flag} {value[flag[2:]]} with the KL in the reward (audited: {', '.join(choices)})"
            _not_audited(path, "OpenRLHF", what)
    return UserSetting("OpenRLHF", openrlhf_adapter.reward_name(estimator, value["algo.advantage.is_correction_level"]))
