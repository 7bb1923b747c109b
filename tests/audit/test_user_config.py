"""`klrl audit --config`: TRL's own configs (GRPOConfig and RLOOConfig instances, as TRL writes them)
are the audited settings they state, end to end for one; and a file that does not parse, an unknown
KL key, a value outside the library's choices, a contradiction or a missing trainer is one line
naming the file (verl's and OpenRLHF's by their installed schema, skipped where it is not built)."""

import json
import re
import warnings

import pytest
import yaml

from klrl.audit import user_config
from klrl.audit.user_config import UserSetting, read_setting
from klrl.cli import main

GRPO_NAME = "GRPOTrainer beta>0, loss_type=dapo, use_bias_correction_kl={}, importance_sampling_level=token"


def trl_config(tmp_path, config_class: str, name: str, **options):
    """TRL's own config, as TRL serialises it (`to_json_string`), in a JSON or YAML file `name`."""
    trl = pytest.importorskip("trl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        config = getattr(trl, config_class)(output_dir=str(tmp_path), report_to="none", use_cpu=True, **options)
    path = tmp_path / name
    text = config.to_json_string()
    path.write_text(text if name.endswith(".json") else yaml.safe_dump(json.loads(text)))
    return path


def schema(library: str):
    """Skip unless the library's installed schema can be read (its audit environment is built)."""
    relative = {"verl": user_config.VERL_SCHEMA, "OpenRLHF": user_config.OPENRLHF_CLI}[library]
    try:
        return user_config._package_file(library, relative)
    except ValueError as error:
        pytest.skip(str(error))


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_trl_defaults_are_the_settings_they_state(tmp_path):
    # GRPOConfig's beta is 0 by default: no KL term; RLOOConfig's is not
    assert read_setting(trl_config(tmp_path, "GRPOConfig", "grpo.json")) == UserSetting("TRL", None, "beta is 0")
    rloo = read_setting(trl_config(tmp_path, "RLOOConfig", "rloo.json"))
    assert rloo == UserSetting("TRL", "RLOOTrainer beta>0 (KL in the reward, defaults)")
    grpo = read_setting(trl_config(tmp_path, "GRPOConfig", "grpo.yaml", beta=0.04))
    assert grpo == UserSetting("TRL", GRPO_NAME.format(True) + " (defaults)")
    assert read_setting(write(tmp_path, "g.yaml", "trainer: grpo\nbeta: 0.1\nuse_bias_correction_kl: false\n")) == (
        UserSetting("TRL", GRPO_NAME.format(False))
    )


@pytest.mark.slow
def test_trl_config_end_to_end(tmp_path, capsys):
    path = trl_config(tmp_path, "GRPOConfig", "grpo.yaml", beta=0.04, use_bias_correction_kl=False)
    assert main(["audit", "--config", str(path), "--vocab", "2", "--horizon", "3"]) == 0
    out = capsys.readouterr().out
    name = GRPO_NAME.format(False)
    assert out.startswith(f"{path}: TRL ")
    assert f"| {name} | biased, 1.659 (token-forward-kl) | biased, 4.510 (other) | biased, 1.523 (other) |" in out
    assert "On-policy its expected gradient is the token-forward-kl gradient, not the sequence's reverse KL's" in out
    advice = out.split("change to one of TRL's settings:")[1]
    assert "| RLOOTrainer beta>0 (KL in the reward, defaults) | unbiased, 0.000 (sequence-reverse-kl) |" in advice
    assert f"(biased for the sequence's): `{GRPO_NAME.format(True)} (defaults)`." in advice
    grpo = trl_config(tmp_path, "GRPOConfig", "grpo.json")
    assert main(["audit", "--config", str(grpo)]) == 0
    assert capsys.readouterr().out == f"{grpo}: TRL applies no KL term (beta is 0): nothing to audit\n"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.json", '{"beta": 0.1,\n "loss_type": }\n', ":2: not valid JSON: Expecting value"),
        ("a.yaml", "beta: 0.1\nloss_type: [dapo\n", ":3: not valid YAML: expected ',' or ']', but got '<stream end>'"),
        ("a.yaml", "- beta\n", ": not a mapping of config keys"),
        ("a.sh", "python -m openrlhf.cli.train_ppo_ray \\\n  --algo.kl.estimator 'k3\n", ":1: not valid shell words"),
        ("a.txt", "lr 1e-6\n", ": neither an openrlhf.cli.train_ppo_ray command nor --flag tokens"),
    ],
)
def test_a_file_that_does_not_parse_is_one_line_naming_it(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}{message}")):
        read_setting(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("beta: 0.1\nuse_bias_corection_kl: true\n", "use_bias_corection_kl: not a field of TRL's GRPOConfig"),
        ("beta: 0.1\nlearning_rate: 1.0e-6\n", "which TRL trainer? add `trainer: grpo` or `trainer: rloo`"),
        ("trainer: rloo\nbeta: 0.1\nloss_type: dapo\n", "loss_type: a field of GRPOConfig only, in a rloo config"),
        ("trainer: grpo\nbeta: 0.1\nloss_type: ppo\n", "loss_type: 'ppo' is not one of grpo, bnpo, dr_grpo, dapo"),
        ("trainer: grpo\nbeta: on\n", "beta: True is not a number"),
        ("trainer: rloo\nbeta: 0.1\nnormalize_advantages: true\n", "RLOOConfig normalize_advantages=True: not one of"),
    ],
)
def test_trl_mistakes_are_one_line(tmp_path, text, message):
    pytest.importorskip("trl")
    path = write(tmp_path, "t.yaml", text)
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}: {message}")):
        read_setting(path)


def test_verl_keys_values_and_contradictions(tmp_path):
    schema("verl")
    actor = "actor_rollout_ref:\n  actor:\n    {}\n"
    cases = {
        actor.format("use_kl_los: true"): "actor_rollout_ref.actor.use_kl_los: not a key of verl's config",
        actor.format(
            "use_kl_loss: true\n    kl_loss_type: k4"
        ): "actor_rollout_ref.actor.kl_loss_type: 'k4' is not one of",
        actor.format("use_kl_loss: true") + "algorithm:\n  use_kl_in_reward: true\n": (
            "actor_rollout_ref.actor.use_kl_loss and algorithm.use_kl_in_reward both true (verl applies both KL terms): "
            "not one of verl's audited settings"
        ),
        "algorithm:\n  rollout_correction:\n    rollout_iss: sequence\n": "algorithm.rollout_correction.rollout_iss: not",
    }
    for text, message in cases.items():
        path = write(tmp_path, "v.yaml", text)
        with pytest.raises(ValueError, match="^" + re.escape(f"{path}: {message}")):
            read_setting(path)
    # keys outside the KL's sections are not read; the schema's defaults fill in the rest
    path = write(tmp_path, "v.yaml", "trainer:\n  nnodes: 2\n  made_up: 1\n" + actor.format("use_kl_loss: true"))
    assert read_setting(path) == UserSetting(
        "verl", "use_kl_loss=True, kl_loss_type=low_var_kl, loss_agg_mode=token-mean"
    )
    off = "actor_rollout_ref.actor.use_kl_loss and algorithm.use_kl_in_reward are false"
    assert read_setting(write(tmp_path, "v.yaml", "algorithm:\n  gamma: 1.0\n")) == UserSetting("verl", None, off)


def test_openrlhf_flags_by_its_own_parser(tmp_path):
    schema("OpenRLHF")
    path = write(tmp_path, "o.txt", "--algo.kl.use_loss --algo.kl.estimatr k3\n")
    with pytest.raises(
        ValueError, match=r"o\.txt: --algo\.kl\.estimatr: not an argument of OpenRLHF's train_ppo_ray\.py$"
    ):
        read_setting(path)
    path = write(tmp_path, "o.txt", "--algo.kl.use_loss --algo.kl.estimator k4\n")
    with pytest.raises(ValueError, match=r"o\.txt: argument --algo\.kl\.estimator: invalid choice: 'k4'"):
        read_setting(path)
    # an unknown flag outside the KL's argument groups is not read
    path = write(tmp_path, "o.txt", "--prompt_max_len 1024 --algo.kl.use_loss --algo.kl.estimator k2\n")
    assert read_setting(path) == UserSetting("OpenRLHF", "--algo.kl.use_loss --algo.kl.estimator k2")
    path = write(
        tmp_path, "o.yaml", "algo:\n  kl:\n    use_loss: true\n    unbiased_gradient: true\n    estimator: k3\n"
    )
    assert read_setting(path) == UserSetting(
        "OpenRLHF", "--algo.kl.use_loss --algo.kl.estimator k3 --algo.kl.unbiased_gradient"
    )
    path = write(tmp_path, "o.yaml", "algo.kl.init_coef: 0\n")
    assert read_setting(path) == UserSetting("OpenRLHF", None, "--algo.kl.init_coef is 0")
