"""verl's launch settings → the audited setting they are: a Hydra override list (the words after
`python3 -m verl.trainer.main_ppo`), or a YAML/JSON config (nested keys, or dotted keys read as
nested), read against verl 0.9.1's own config (`verl/trainer/config/_generated_ppo_trainer.yaml`,
whose defaults fill in what the file leaves out; tests/audit/test_verl.py checks the key lists
against the installed file).

Values are read as verl reads them: an override's value by Hydra's grammar (`True`/`false` are
booleans, `1e-3` a float, `null` None, quotes a string), a YAML value by OmegaConf's loader (which
also reads `1e-3` as a float, where plain YAML reads a string); `${key}` and
`${oc.select:key,default}` interpolations are resolved. The KL estimator's name is normalised
as verl normalises it: `core_algos.kl_penalty` strips a trailing "+" (a straight-through K2
gradient under the estimator's value, except for k2 itself: core_algos.py:2201-2203 at 0.9.1),
then `kl_penalty_forward` dispatches kl|k1, abs, mse|k2, low_var_kl|k3 (core_algos.py:2228-2245),
K3's value clamped to [-10, 10] (core_algos.py:2245). A section or key verl's config lacks, under
`actor_rollout_ref`, its `actor` and `algorithm`, is refused naming it; other sections' keys are
not read.
"""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path

from klrl.audit.reading import TARGETS, Reading

VERSION = "0.9.1"
SCHEMA = "verl/trainer/config/_generated_ppo_trainer.yaml"
SECTIONS = (
    "actor_rollout_ref data critic custom_reward_function reward_model sandbox_fusion reward algorithm "
    "distillation transfer_queue trainer global_profiler skip ray_kwargs defaults hydra"
).split()
ACTOR_ROLLOUT_REF = ("actor", "ref", "rollout", "model", "hybrid_engine", "nccl_timeout")
ACTOR_KEYS = (
    "optim fsdp_config megatron _target_ rollout_n strategy ppo_mini_batch_size ppo_micro_batch_size "
    "ppo_micro_batch_size_per_gpu use_dynamic_bsz ppo_max_token_len_per_gpu clip_ratio clip_ratio_low "
    "clip_ratio_high tau_pos tau_neg freeze_vision_tower policy_loss clip_ratio_c loss_agg_mode "
    "loss_scale_factor entropy_coeff calculate_entropy calculate_sum_pi_squared use_kl_loss use_prefix_grouper "
    "use_torch_compile kl_loss_coef kl_loss_type ppo_epochs shuffle data_loader_seed checkpoint "
    "use_fused_kernels profiler qat grad_clip ulysses_sequence_parallel_size entropy_from_logits_with_chunking "
    "entropy_from_logits_chunk_size entropy_checkpointing pad_to_length use_remove_padding "
    "policy_loss._target_ policy_loss.loss_mode policy_loss.clip_cov_ratio policy_loss.clip_cov_lb "
    "policy_loss.clip_cov_ub policy_loss.kl_cov_ratio policy_loss.ppo_kl_coef policy_loss.dro_beta"
).split()
ALGORITHM_KEYS = (
    "rollout_correction rollout_correction.rollout_is rollout_correction.rollout_is_threshold "
    "rollout_correction.rollout_rs rollout_correction.rollout_rs_threshold rollout_correction.bypass_mode "
    "rollout_correction.loss_type rollout_correction.rollout_is_batch_normalize _target_ gamma lam adv_estimator "
    "norm_adv_by_std_in_grpo filter_groups filter_groups._target_ filter_groups.enable filter_groups.metric "
    "filter_groups.max_num_gen_batches filter_groups.max_inflight_gen_batches use_kl_in_reward kl_penalty kl_ctrl "
    "kl_ctrl._target_ kl_ctrl.type kl_ctrl.kl_coef kl_ctrl.horizon kl_ctrl.target_kl use_pf_ppo pf_ppo "
    "pf_ppo.reweight_method pf_ppo.weight_pow"
).split()
ACTOR, ALGORITHM = "actor_rollout_ref.actor.", "algorithm."
# the KL keys' defaults, _generated_ppo_trainer.yaml at 0.9.1 (its line)
DEFAULTS = {
    ACTOR + "policy_loss.loss_mode": ("vanilla", 93),
    ACTOR + "loss_agg_mode": ("token-mean", 101),
    ACTOR + "use_kl_loss": (False, 106),
    ACTOR + "kl_loss_coef": (0.001, 109),
    ACTOR + "kl_loss_type": ("low_var_kl", 110),
    ALGORITHM + "rollout_correction.rollout_is": (None, 851),
    ALGORITHM + "adv_estimator": ("gae", 861),
    ALGORITHM + "norm_adv_by_std_in_grpo": (True, 862),
    ALGORITHM + "use_kl_in_reward": (False, 869),
    ALGORITHM + "kl_penalty": ("kl", 870),
    ALGORITHM + "kl_ctrl.kl_coef": (0.001, 874),
}
# core_algos.kl_penalty_forward's names (core_algos.py:2228-2245 at 0.9.1) -> the estimator
ESTIMATOR_ALIASES = {"kl": "k1", "k1": "k1", "abs": "abs", "mse": "k2", "k2": "k2", "low_var_kl": "k3", "k3": "k3"}
K3_CLAMP = 10.0  # kl_penalty_forward clamps K3's value to [-10, 10]
# ActorConfig.__post_init__'s valid_loss_agg_modes (workers/config/actor.py:212-218 at 0.9.1)
LOSS_AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
# the aggregations whose expected KL gradient on the toy's fixed-length sequences is token-mean's (verl_adapter)
TOKEN_MEAN_ON_THE_TOY = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
# core_algos.ADV_ESTIMATOR_REGISTRY at 0.9.1 (get_adv_estimator_fn raises for any other name: core_algos.py:148-149)
ADV_ESTIMATORS = (
    "gae gdpo gpg grpo grpo_passk grpo_vectorized opo optimal_token_baseline reinforce_plus_plus "
    "reinforce_plus_plus_baseline remax rloo rloo_vectorized tir_optimal_token_baseline"
).split()
ROLLOUT_IS = (None, "token", "sequence")  # rollout_corr_helper's levels; None: no correction
# OmegaConf's YAML loader's float pattern (omegaconf/_utils.py get_yaml_loader): 1e-3 is a float
FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)\.?[0-9_]*(?:[eE][-+]?[0-9]+)$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$")
FIX = (
    f"{ACTOR}use_kl_loss=False {ALGORITHM}use_kl_in_reward=True {ALGORITHM}kl_penalty=kl "
    f"{ALGORITHM}adv_estimator=rloo (K1 in the reward)"
)


def clamp_band() -> tuple[float, float]:
    """The πref/πθ between which K3's value r − log r − 1 stays under K3_CLAMP (outside, the clamp acts), by bisection."""

    def crossing(low: float, high: float) -> float:  # K3 is monotone on each side of r = 1
        below = low - math.log(low) - 1 < K3_CLAMP
        for _ in range(200):
            middle = math.sqrt(low * high)
            if (middle - math.log(middle) - 1 < K3_CLAMP) == below:
                low = middle
            else:
                high = middle
        return low

    return crossing(1e-12, 1.0), crossing(1.0, 1e3)


def _band() -> str:
    low, high = clamp_band()
    return f"πref/πθ in [{low:.1e}, {high:.1f}]"


def override_value(text: str):
    """A Hydra override's value by its grammar: booleans, null, int, float, quoted or bare strings."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "null":
        return None
    for kind in (int, float):
        try:
            return kind(text.replace("_", ""))
        except ValueError:
            pass
    return text


def yaml_value(value):
    """A value as OmegaConf's loader reads it (PyYAML reads `1e-3` as a string)."""
    return float(value) if isinstance(value, str) and FLOAT.match(value) else value


def from_overrides(path: Path, words) -> dict:
    """{dotted key: (value, line, what is not understood)} of the override words."""
    values = {}
    for word in words:
        text = word.text
        if text.startswith("--config-name") or text.startswith("--config-path"):
            name = text.split("=", 1)[-1].strip("'\"")
            if text.startswith("--config-name") and Path(name).stem not in ("ppo_trainer", "ppo_megatron_trainer"):
                raise ValueError(
                    f"{path}:{word.line}: --config-name {name}: a config of the script's own, not read here "
                    "(audit that YAML file, with these overrides in it)"
                )
            continue
        if text.startswith("~"):
            raise ValueError(f"{path}:{word.line}: {text}: deleting a key is not read")
        key, equals, value = text.lstrip("+").partition("=")
        if not equals or not re.fullmatch(r"[A-Za-z_][\w.]*", key):
            raise ValueError(f"{path}:{word.line}: {text!r}: not a Hydra override key=value")
        values[key] = (override_value(value), word.line, word.unknown)
    return values


def from_mapping(path: Path, data: dict, key_lines: dict) -> tuple[dict, list[str]]:
    """{dotted key: (value, line, ())} of a YAML/JSON config, dotted keys read as nested, and notes."""
    values, notes, stack = {}, [], [("", data)]
    while stack:
        prefix, mapping = stack.pop()
        for key, value in mapping.items():
            dotted = f"{prefix}{key}"
            if dotted in ("defaults", "hydra"):
                notes.append(f"{dotted}: Hydra's, not read (verl's own config gives the defaults)")
                continue
            if isinstance(value, dict) and value:
                stack.append((dotted + ".", value))
                continue
            if "." in str(key):
                notes.append(f"{dotted}: a dotted key, read as nested")
            values[dotted] = (yaml_value(value), key_lines.get(dotted, 0), ())
    return values, notes


def _check_keys(path: Path, values: dict) -> None:
    """Refuse a section or key verl's config lacks (under actor_rollout_ref, its actor and algorithm)."""
    for key, (_, line, _) in values.items():
        parts = key.split(".")
        if parts[0] not in SECTIONS:
            known, given = SECTIONS, parts[0]
        elif parts[0] == "actor_rollout_ref" and len(parts) > 1 and parts[1] not in ACTOR_ROLLOUT_REF:
            known, given = ACTOR_ROLLOUT_REF, "actor_rollout_ref." + parts[1]
        elif key.startswith(ACTOR) and not _known(key[len(ACTOR) :], ACTOR_KEYS):
            known, given = ACTOR_KEYS, key
        elif key.startswith(ALGORITHM) and not _known(key[len(ALGORITHM) :], ALGORITHM_KEYS):
            known, given = ALGORITHM_KEYS, key
        else:
            continue
        close = difflib.get_close_matches(given.split(".")[-1], [name.split(".")[-1] for name in known], n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"{path}:{line}: {given}: not a key of verl {VERSION}'s config{hint}")


def _known(key: str, known: list[str]) -> bool:
    """The key is listed, or lies in a listed section whose own keys are not (optim.*, fsdp_config.*)."""
    detailed = {name.split(".")[0] for name in known if "." in name}
    head = key.split(".")[0]
    return key in known or (head in known and head not in detailed)


def _resolve(path: Path, key: str, values: dict, depth: int = 0):
    """The key's value (interpolations resolved) and line; the default (line 0) when absent."""
    if key not in values:
        return DEFAULTS[key][0], 0
    value, line, unknown = values[key]
    if unknown:
        raise ValueError(f"{path}:{line}: {key}: its value holds {unknown[0]}, which this reader does not expand")
    match = re.fullmatch(r"\$\{(?:oc\.select:)?([\w.]+)(?:,(.*))?\}", value) if isinstance(value, str) else None
    if match and depth < 8:
        target, default = match.groups()
        if target in values or target in DEFAULTS:
            return _resolve(path, target, values, depth + 1)[0], line
        return (override_value(default) if default is not None else None), line
    if isinstance(value, str) and "${" in value:
        raise ValueError(f"{path}:{line}: {key}: the interpolation {value} is not resolved here")
    return value, line


def read(path: Path, values: dict, why: str, notes: list[str]) -> Reading:
    """The Reading of verl settings {dotted key: (value, line, unknown)}."""
    _check_keys(path, values)
    reading = Reading("verl", why, notes=notes)

    def get(key: str, choices: tuple | None = None, number: bool = False):
        value, line = _resolve(path, key, values)
        if (
            isinstance(value, str)
            and choices
            and (False, True) == tuple(choices)
            and value.lower() in ("true", "false")
        ):
            value = value.lower() == "true"
        if choices is not None and (value not in choices or isinstance(value, bool) != isinstance(choices[-1], bool)):
            shown = ", ".join("null" if choice is None else str(choice) for choice in choices)
            raise ValueError(f"{path}:{line}: {key}: {value!r} is not one of {shown}")
        if number and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"{path}:{line}: {key}: {value!r} is not a number")
        reading.keys.append((key, value, line))
        return value

    in_loss = get(ACTOR + "use_kl_loss", (False, True))
    in_reward = get(ALGORITHM + "use_kl_in_reward", (False, True))
    if in_loss and in_reward:
        raise ValueError(
            f"{path}: {ACTOR}use_kl_loss and {ALGORITHM}use_kl_in_reward both true (verl applies both KL terms): "
            "not one of verl's audited settings"
        )
    if not (in_loss or in_reward):
        reading.no_kl = f"{ACTOR}use_kl_loss and {ALGORITHM}use_kl_in_reward are false"
        return reading
    key = ACTOR + "kl_loss_type" if in_loss else ALGORITHM + "kl_penalty"
    named = get(key, tuple(ESTIMATOR_ALIASES) + tuple(name + "+" for name in ESTIMATOR_ALIASES))
    estimator, plus = ESTIMATOR_ALIASES[named.rstrip("+")], named.endswith("+")
    aggregation = get(ACTOR + "loss_agg_mode", LOSS_AGG_MODES)
    beta = get(ACTOR + "kl_loss_coef" if in_loss else ALGORITHM + "kl_ctrl.kl_coef", number=True)
    reading.beta = beta
    if beta == 0:
        reading.no_kl = f"{reading.keys[-1][0]} is 0"
        return reading
    clamp = (
        f", its value clamped to [-{K3_CLAMP:g}, {K3_CLAMP:g}] (unclamped for {_band()})" if estimator == "k3" else ""
    )
    from klrl.audit import verl_adapter

    if in_loss:
        straight = plus and estimator != "k2"  # kl_penalty: k2+ is k2 itself
        gradient = "k2" if straight else estimator
        reading.kl = (
            f"{named} = {estimator}{' with a straight-through K2 gradient' if straight else ''} in the loss{clamp}, "
            f"aggregated {aggregation}, β = {beta:g}"
        )
        reading.target = TARGETS.get(f"{gradient}-loss", "none the registry names")
        if gradient == "k3":
            reading.target += f"; zero where the clamp acts (outside {_band()})"
        # the audited rows: k3 as low_var_kl, the straight-through forms of k1 and k3, abs+ by its gradient (k2's)
        if straight and estimator != "abs":
            loss_type = estimator + "+"
        else:
            loss_type = {"k3": "low_var_kl"}.get(gradient, gradient)
        row = aggregation
        if aggregation in TOKEN_MEAN_ON_THE_TOY:
            row = "token-mean"
            if aggregation != row:
                reading.notes.append(
                    f"loss_agg_mode {aggregation}: on the toy's fixed-length sequences token-mean's row"
                )
        reading.setting = verl_adapter.loss_name(loss_type, row)
    else:
        policy = get(ACTOR + "policy_loss.loss_mode")
        adv_estimator = get(ALGORITHM + "adv_estimator", tuple(ADV_ESTIMATORS))
        norm = get(ALGORITHM + "norm_adv_by_std_in_grpo", (False, True))
        rollout_is = get(ALGORITHM + "rollout_correction.rollout_is", ROLLOUT_IS)
        policy_term = (
            (ACTOR + "loss_agg_mode", aggregation, "token-mean"),
            (ACTOR + "policy_loss.loss_mode", policy, "vanilla"),
        )
        for audited_key, value, audited in policy_term:  # the policy term the reward rows run
            if value != audited:
                raise ValueError(
                    f"{path}: {audited_key}={value} with the KL in the reward (audited: {audited}): "
                    "not one of verl's audited settings"
                )
        penalty = {"k1": "kl"}.get(estimator, estimator)
        reading.kl = f"{named} = {estimator} in the reward{clamp}, advantages {adv_estimator}, β = {beta:g}"
        reading.target = TARGETS.get(f"{estimator}-reward", "none the registry names")
        reading.setting = verl_adapter.reward_name(penalty, adv_estimator, norm, rollout_is)
    reading.fix = FIX
    return reading
