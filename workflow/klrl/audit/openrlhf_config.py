"""OpenRLHF's `train_ppo_ray` arguments → the audited setting they are, read against OpenRLHF
0.11.2's flags (`klrl.audit.openrlhf_flags`), as its argparse parser reads them: `--flag value`
or `--flag=value`, a unique prefix of a flag standing for it (argparse's abbreviations), the last
of a repeated flag winning, values typed as the parser types them (`--algo.kl.init_coef 1e-3` a
float). An older flat flag is read as today's through the table, and named in a note with the
version that renamed it; a flag neither knows is refused in one line naming it (OpenRLHF's own
parser refuses it too), a value outside a KL flag's choices likewise.

The KL configuration is OpenRLHF's: `--algo.kl.use_loss` puts `compute_approx_kl`'s estimator
(`--algo.kl.estimator` k1|k2|k3, models/utils.py) in the loss, else in the reward;
`--algo.kl.unbiased_gradient` (in the loss) gives every estimator the reverse KL's gradient;
β is `--algo.kl.init_coef` (0: no reference model, no KL term).
"""

from __future__ import annotations

from pathlib import Path

from klrl.audit import openrlhf_flags as flags
from klrl.audit.reading import TARGETS, Reading

VERSION = "0.11.2"
SECTIONS = ("algo", "actor")  # the argument groups that hold the KL's flags
# today's KL flags: (default, choices or a type) as train_ppo_ray.py declares them at 0.11.2 (its line)
KL_FLAGS = {
    "algo.kl.init_coef": (0.01, float, 438),
    "actor.policy_loss_type": ("ppo", ("ppo", "gspo"), 439),
    "actor.loss_agg_mode": ("token-mean", ("token-mean", "seq-mean-token-mean"), 441),
    "algo.kl.estimator": ("k1", ("k1", "k2", "k3"), 449),
    "algo.kl.unbiased_gradient": (False, bool, 458),
    "algo.advantage.estimator": (
        "gae",
        ("gae", "reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo", "flash_reinforce"),
        515,
    ),
    "algo.kl.use_loss": (False, bool, 524),
    "algo.advantage.is_correction_level": ("off", ("off", "token", "seq"), 261),
    "algo.advantage.is_correction_mode": ("mask", ("mask", "clip"), 269),
    "algo.advantage.is_correction_gating": ("ratio", ("ratio", "binary_kl", "tv"), 276),
}
CLAMP = 10.0  # compute_approx_kl clamps every estimator's value to [-10, 10] (models/utils.py:113 at 0.11.2)
FIX = "drop --algo.kl.use_loss and set --algo.kl.estimator k1 (K1 in the reward) with --algo.advantage.estimator rloo"


def _name(path: Path, word) -> tuple[str, str | None]:
    """A `--flag[=value]` word as (today's flag, its inline value)."""
    flag, equals, inline = word.text[2:].partition("=")
    known = flags.SWITCHES + flags.VALUED
    if flag in known:
        return flag, inline if equals else None
    old = (
        flags.RENAMED_0_10_2.keys()
        | flags.EARLIER.keys()
        | flags.DROPPED.keys()
        | set(flags.ENGINE_CORRECTION_SWITCHES + flags.ENGINE_CORRECTION_TYPES)
    )
    if flag in old:
        return flag, inline if equals else None
    matches = [name for name in known if name.startswith(flag)]
    if len(matches) == 1:  # argparse's unique-prefix abbreviation
        return matches[0], inline if equals else None
    raise ValueError(
        f"{path}:{word.line}: --{flag}: not a flag of OpenRLHF {VERSION}'s train_ppo_ray, nor an older one the "
        "rename table knows" + (f" (ambiguous: {', '.join('--' + m for m in matches[:3])})" if matches else "")
    )


def parse(path: Path, words) -> tuple[dict, list[str]]:
    """{today's flag: (value, line, unknown)} of the command's arguments, and notes on the old flags."""
    values, notes, others, index = {}, [], [], 0
    engine = {"on": None, "type": ("tis", 0, ())}
    while index < len(words):
        word = words[index]
        if not word.text.startswith("--"):
            raise ValueError(f"{path}:{word.line}: {word.text!r}: an argument without its --flag")
        flag, inline = _name(path, word)
        index += 1
        given = [] if inline is None else [inline]
        while inline is None and index < len(words) and not words[index].text.startswith("--"):
            given.append(words[index].text)
            index += 1
        value = " ".join(given) if given else True
        unknown = word.unknown + tuple(u for w in words[index - len(given) : index] for u in w.unknown)
        if flag in flags.SWITCHES and given:
            raise ValueError(f"{path}:{word.line}: --{flag} takes no value (given {value!r})")
        if flag in flags.VALUED and not given:
            raise ValueError(f"{path}:{word.line}: --{flag} needs a value")
        if flag in flags.DROPPED:
            notes.append(f"--{flag} (line {word.line}): dropped by OpenRLHF {flags.DROPPED[flag]}, not read")
            continue
        if flag in flags.ENGINE_CORRECTION_SWITCHES:
            engine["on"] = word.line
            notes.append(f"--{flag} (line {word.line}): since 0.11.2 --algo.advantage.is_correction_level/_mode")
            continue
        if flag in flags.ENGINE_CORRECTION_TYPES:
            engine["type"] = (value, word.line, unknown)
            continue
        if flag in flags.EARLIER:
            new, standing, version = flags.EARLIER[flag]
            notes.append(f"--{flag} (line {word.line}): renamed --{new} in OpenRLHF {version}, read as it")
            flag, value = new, standing if standing is not None else value
        elif flag in flags.RENAMED_0_10_2:
            new = flags.RENAMED_0_10_2[flag]
            if new in KL_FLAGS:
                notes.append(f"--{flag} (line {word.line}): renamed --{new} in OpenRLHF 0.10.2, read as it")
            else:
                others.append(f"--{flag}")
            flag = new
        values[flag] = (value, word.line, unknown)
    if others:  # the renamed flags that do not touch the KL term, in one note
        notes.append(f"renamed in OpenRLHF 0.10.2 and read as today's, none a KL flag: {', '.join(others)}")
    if engine["on"] is not None:
        scheme, line, unknown = engine["type"]
        if scheme not in flags.ENGINE_CORRECTION:
            raise ValueError(f"{path}:{line}: {scheme!r} is not one of {', '.join(flags.ENGINE_CORRECTION)}")
        level, mode = flags.ENGINE_CORRECTION[scheme]
        values["algo.advantage.is_correction_level"] = (level, engine["on"], unknown)
        values["algo.advantage.is_correction_mode"] = (mode, engine["on"], unknown)
    return values, notes


def from_mapping(path: Path, data: dict, key_lines: dict) -> dict:
    """{flag: (value, line, unknown)} of OpenRLHF's keys in YAML/JSON, nested or dotted."""
    values, stack = {}, [("", data)]
    while stack:
        prefix, mapping = stack.pop()
        for key, value in mapping.items():
            dotted = f"{prefix}{key}"
            if isinstance(value, dict):
                stack.append((dotted + ".", value))
            elif dotted not in flags.SWITCHES + flags.VALUED:
                raise ValueError(
                    f"{path}:{key_lines.get(dotted, 0)}: {dotted}: not a flag of OpenRLHF {VERSION}'s train_ppo_ray"
                )
            elif value is not None:  # null: the flag's default
                values[dotted] = (value, key_lines.get(dotted, 0), ())
    return values


def read(path: Path, values: dict, why: str, notes: list[str]) -> Reading:
    """The Reading of OpenRLHF arguments {flag: (value, line, unknown)}."""
    reading = Reading("OpenRLHF", why, notes=notes)

    def get(flag: str):
        default, kind, _ = KL_FLAGS[flag]
        value, line, unknown = values.get(flag, (default, 0, ()))
        if unknown:
            raise ValueError(
                f"{path}:{line}: --{flag}: its value holds {unknown[0]}, which this reader does not expand"
            )
        if kind is bool and not isinstance(value, bool):
            raise ValueError(f"{path}:{line}: --{flag}: {value!r} is not true or false")
        if kind is float:
            try:
                value = float(value) if not isinstance(value, bool) else None
            except ValueError:
                value = None
            if value is None:
                raise ValueError(f"{path}:{line}: --{flag}: {values[flag][0]!r} is not a number")
        if isinstance(kind, tuple) and value not in kind:
            raise ValueError(f"{path}:{line}: --{flag}: invalid choice: {value!r} (choose from {', '.join(kind)})")
        reading.keys.append(("--" + flag, value, line))
        return value

    beta = get("algo.kl.init_coef")
    reading.beta = beta
    if beta == 0:
        reading.no_kl = "--algo.kl.init_coef is 0"
        return reading
    in_loss, estimator = get("algo.kl.use_loss"), get("algo.kl.estimator")
    aggregation = get("actor.loss_agg_mode")
    from klrl.audit import openrlhf_adapter

    if in_loss:
        unbiased = get("algo.kl.unbiased_gradient")
        reading.kl = (
            f"{estimator} in the loss{' with the reverse KL gradient (unbiased_gradient)' if unbiased else ''}, "
            f"its value clamped to [-{CLAMP:g}, {CLAMP:g}], aggregated {aggregation}, β = {beta:g}"
        )
        reading.target = TARGETS["k1-loss-tokis" if unbiased else f"{estimator}-loss"]
        if not unbiased:
            reading.target += "; zero where the clamp acts"
        # with unbiased_gradient every estimator has the same gradient (the flag's help, train_ppo_ray.py:458-465
        # at 0.11.2: "k1/k2/k3 share the same unbiased gradient"): the audited row is k3's
        reading.setting = openrlhf_adapter.loss_name("k3" if unbiased else estimator, unbiased, aggregation)
    else:
        advantage, policy = get("algo.advantage.estimator"), get("actor.policy_loss_type")
        level = get("algo.advantage.is_correction_level")
        audited = {
            "--algo.advantage.estimator": (advantage, openrlhf_adapter.REWARD_ESTIMATORS),
            "--actor.policy_loss_type": (policy, ("ppo",)),
            "--actor.loss_agg_mode": (aggregation, ("token-mean",)),
        }
        if level != "off":
            audited["--algo.advantage.is_correction_mode"] = (get("algo.advantage.is_correction_mode"), ("mask",))
            audited["--algo.advantage.is_correction_gating"] = (get("algo.advantage.is_correction_gating"), ("ratio",))
        for flag, (value, choices) in audited.items():  # the policy term the reward rows run
            if value not in choices:
                raise ValueError(
                    f"{path}: {flag} {value} with the KL in the reward (audited: {', '.join(choices)}): "
                    "not one of OpenRLHF's audited settings"
                )
        reading.kl = f"{estimator} in the reward, advantages {advantage}, β = {beta:g}"
        reading.target = TARGETS.get(f"{estimator}-reward", "none the registry names")
        reading.setting = openrlhf_adapter.reward_name(estimator, level)
    reading.fix = FIX
    return reading
