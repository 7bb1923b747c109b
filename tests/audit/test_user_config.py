"""`klrl audit --config`: TRL's own configs (GRPOConfig and RLOOConfig instances, as TRL writes them)
are the audited settings they state, end to end for one; verl's and OpenRLHF's keys, flags and
aliases read as the libraries read them (without their environments); and a file that does not
parse, an unknown key, a value outside the library's choices, a contradiction or a missing trainer
is one line naming the file and line."""

import json
import re
import warnings

import pytest
import yaml

from klrl.audit import openrlhf_adapter, trl_adapter, verl_adapter
from klrl.audit.user_config import read_config
from klrl.cli import main

GRPO_NAME = "GRPOTrainer beta>0, loss_type=dapo, use_bias_correction_kl={}, importance_sampling_level=token"
VERL_K3_LOSS = "use_kl_loss=True, kl_loss_type=low_var_kl, loss_agg_mode=token-mean"


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


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def stated(path, library=None) -> tuple:
    reading = read_config(path, library)
    return reading.library, reading.setting, reading.no_kl


def test_trl_defaults_are_the_settings_they_state(tmp_path):
    # GRPOConfig's beta is 0 by default: no KL term; RLOOConfig's is not
    assert stated(trl_config(tmp_path, "GRPOConfig", "grpo.json")) == ("TRL", None, "beta is 0")
    rloo = stated(trl_config(tmp_path, "RLOOConfig", "rloo.json"))
    assert rloo == ("TRL", "RLOOTrainer beta>0 (KL in the reward, defaults)", "")
    grpo = stated(trl_config(tmp_path, "GRPOConfig", "grpo.yaml", beta=0.04))
    assert grpo == ("TRL", GRPO_NAME.format(True) + " (defaults)", "")
    path = write(tmp_path, "g.yaml", "trainer: grpo\nbeta: 0.1\nuse_bias_correction_kl: false\n")
    assert stated(path) == ("TRL", GRPO_NAME.format(False), "")


def test_each_adapters_names_are_its_settings():
    pytest.importorskip("trl")
    assert trl_adapter.names() == [setting.name for setting in trl_adapter.settings()]
    assert len(verl_adapter.names()) == 13 and len(openrlhf_adapter.names()) == 9  # docs/audit.md's rows


@pytest.mark.slow
def test_trl_config_end_to_end(tmp_path, capsys):
    path = trl_config(tmp_path, "GRPOConfig", "grpo.yaml", beta=0.04, use_bias_correction_kl=False)
    assert main(["audit", "--config", str(path), "--vocab", "2", "--horizon", "3"]) == 0
    out = capsys.readouterr().out
    name = GRPO_NAME.format(False)
    assert out.startswith(f"{path}: TRL (GRPOConfig fields: its fields)\n  beta = 0.04  (line ")
    assert f"| {name} | biased, 1.659 (token-forward-kl) | biased, 4.510 (other) | biased, 1.523 (other) |" in out
    assert "On-policy its expected gradient is the token-forward-kl gradient, not the sequence's reverse KL's" in out
    advice = out.split("change to one of TRL's settings:")[1]
    assert "| RLOOTrainer beta>0 (KL in the reward, defaults) | unbiased, 0.000 (sequence-reverse-kl) |" in advice
    assert f"(biased for the sequence's): `{GRPO_NAME.format(True)} (defaults)`." in advice
    grpo = trl_config(tmp_path, "GRPOConfig", "grpo.json")
    assert main(["audit", "--config", str(grpo)]) == 0
    assert capsys.readouterr().out.endswith(f"{grpo}: TRL applies no KL term (beta is 0): nothing to audit\n")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.json", '{"beta": 0.1,\n "loss_type": }\n', ":2: not valid JSON: Expecting value"),
        ("a.yaml", "beta: 0.1\nloss_type: [dapo\n", ":3: not valid YAML: expected ',' or ']', but got '<stream end>'"),
        ("a.yaml", "- beta\n", ": not a mapping of config keys"),
        ("a.sh", "python -m openrlhf.cli.train_ppo_ray \\\n  --algo.kl.estimator 'k3\n", ":2: not valid shell words"),
        ("a.txt", "lr 1e-6\n", ": no launch file recognised: looked for a `python3 -m verl.trainer.main_ppo`"),
        ("a.txt", "--help\n", ":1: --help: not a flag of OpenRLHF 0.11.2's train_ppo_ray, nor an older one"),
    ],
)
def test_a_file_that_does_not_parse_is_one_line_naming_it(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}{message}")):
        read_config(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("beta: 0.1\nuse_bias_corection_kl: true\n", "2: use_bias_corection_kl: not a field of TRL's GRPOConfig"),
        ("beta: 0.1\nlearning_rate: 1.0e-6\n", " which TRL trainer? add `trainer: grpo` or `trainer: rloo`"),
        ("trainer: rloo\nbeta: 0.1\nloss_type: dapo\n", "3: loss_type: a field of GRPOConfig only, in a rloo config"),
        ("trainer: grpo\nbeta: 0.1\nloss_type: ppo\n", "3: loss_type: 'ppo' is not one of grpo, bnpo, dr_grpo, dapo"),
        ("trainer: grpo\nbeta: on\n", "2: beta: True is not a number"),
        ("trainer: rloo\nbeta: 0.1\nnormalize_advantages: true\n", " RLOOConfig normalize_advantages=True: not one"),
    ],
)
def test_trl_mistakes_are_one_line(tmp_path, text, message):
    pytest.importorskip("trl")
    path = write(tmp_path, "t.yaml", text)
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}:{message}")):
        read_config(path)


def test_trl_recipe_keys_outside_its_configs_are_ignored_and_listed(tmp_path):
    pytest.importorskip("trl")
    path = write(
        tmp_path, "grpo_recipe.yaml", "beta: 0.04\nreward_funcs: [accuracy]\nsystem_prompt: think\nmax_steps: 10\n"
    )
    reading = read_config(path)
    assert reading.setting == GRPO_NAME.format(True) + " (defaults)"
    assert reading.notes == ["ignored (not a field of TRL's configs): reward_funcs, system_prompt"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("actor_rollout_ref:\n  actor:\n    use_kl_los: true\n", "3: actor_rollout_ref.actor.use_kl_los: not a key"),
        ("actor_rollout_ref:\n  actr:\n    use_kl_loss: true\n", "3: actor_rollout_ref.actr: not a key of verl 0.9.1"),
        (
            "actor_rollout_ref:\n  actor:\n    use_kl_loss: true\n    kl_loss_type: k4\n",
            "4: actor_rollout_ref.actor.kl_loss_type: 'k4' is not one of kl, k1, abs, mse, k2, low_var_kl, k3, kl+",
        ),
        (
            "actor_rollout_ref:\n  actor:\n    use_kl_loss: true\nalgorithm:\n  use_kl_in_reward: true\n",
            " actor_rollout_ref.actor.use_kl_loss and algorithm.use_kl_in_reward both true",
        ),
        (
            "algorithm:\n  rollout_correction:\n    rollout_iss: sequence\n",
            "3: algorithm.rollout_correction.rollout_iss",
        ),
        (
            "algorithm:\n  use_kl_in_reward: true\n  adv_estimator: rlooo\n",
            "3: algorithm.adv_estimator: 'rlooo' is not one of gae, gdpo, gpg, grpo",
        ),
        (
            "algoritm:\n  use_kl_in_reward: true\nactor_rollout_ref: {}\n",
            "2: algoritm: not a key of verl 0.9.1's config",
        ),
    ],
)
def test_verl_keys_values_and_contradictions(tmp_path, text, message):
    path = write(tmp_path, "v.yaml", text)
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}:{message}")):
        read_config(path)


def test_verl_defaults_fill_in_and_other_sections_are_not_read(tmp_path):
    text = "trainer:\n  nnodes: 2\n  made_up: 1\nactor_rollout_ref:\n  actor:\n    use_kl_loss: true\n"
    assert stated(write(tmp_path, "v.yaml", text)) == ("verl", VERL_K3_LOSS, "")
    off = "actor_rollout_ref.actor.use_kl_loss and algorithm.use_kl_in_reward are false"
    assert stated(write(tmp_path, "v.yaml", "algorithm:\n  gamma: 1.0\n")) == ("verl", None, off)


@pytest.mark.parametrize(
    ("text", "library", "setting", "beta"),
    [
        # OmegaConf reads 1e-3 as a float, plain YAML as a string
        (
            "actor_rollout_ref.actor.use_kl_loss: true\nactor_rollout_ref.actor.kl_loss_coef: 1e-3\n",
            "verl",
            VERL_K3_LOSS,
            1e-3,
        ),
        ("algo:\n  kl:\n    use_loss: true\n    unbiased_gradient: true\n    estimator: k3\n", "OpenRLHF", None, 0.01),
    ],
)
def test_dotted_and_nested_keys(tmp_path, text, library, setting, beta):
    reading = read_config(write(tmp_path, "c.yaml", text))
    assert reading.library == library and reading.beta == beta
    if setting:
        assert reading.setting == setting


def test_openrlhf_flags_as_its_parser_reads_them(tmp_path):
    path = write(tmp_path, "o.txt", "--algo.kl.use_loss --algo.kl.estimatr k3\n")
    with pytest.raises(ValueError, match=r"o\.txt:1: --algo\.kl\.estimatr: not a flag of OpenRLHF 0\.11\.2's"):
        read_config(path)
    path = write(tmp_path, "o.txt", "--algo.kl.use_loss\n--algo.kl.estimator k4\n")
    with pytest.raises(ValueError, match=r"o\.txt:2: --algo\.kl\.estimator: invalid choice: 'k4' \(choose from k1"):
        read_config(path)
    # argparse's unique prefixes, the last repeated flag winning, --flag=value
    path = write(tmp_path, "o.txt", "--algo.kl.use_l --algo.kl.estimator k3 --algo.kl.estimator=k2\n")
    assert stated(path) == ("OpenRLHF", "--algo.kl.use_loss --algo.kl.estimator k2", "")
    # with unbiased_gradient every estimator has one gradient: k1's is k3's audited row
    path = write(tmp_path, "o.txt", "--algo.kl.use_loss --algo.kl.estimator k1 --algo.kl.unbiased_gradient\n")
    assert stated(path)[1] == "--algo.kl.use_loss --algo.kl.estimator k3 --algo.kl.unbiased_gradient"
    assert stated(write(tmp_path, "o.yaml", "algo.kl.init_coef: 0\n")) == ("OpenRLHF", None, "--algo.kl.init_coef is 0")
    path = write(tmp_path, "o.yaml", "algo:\n  kl:\n    use_loss: true\n    estimatr: k2\n")
    with pytest.raises(ValueError, match=r"o\.yaml:4: algo\.kl\.estimatr: not a flag of OpenRLHF"):
        read_config(path)


@pytest.mark.parametrize(
    ("aggregation", "setting"),
    [
        ("seq-mean-token-mean", VERL_K3_LOSS),
        ("seq-mean-token-sum-norm", VERL_K3_LOSS),
        ("seq-mean-token-sum", "use_kl_loss=True, kl_loss_type=low_var_kl, loss_agg_mode=seq-mean-token-sum"),
    ],
)
def test_verl_aggregations_with_token_means_gradient_are_its_row(tmp_path, aggregation, setting):
    text = f"actor_rollout_ref.actor.use_kl_loss=True\nactor_rollout_ref.actor.loss_agg_mode={aggregation}\n"
    reading = read_config(write(tmp_path, "o.txt", text))
    assert reading.setting == setting
    assert reading.notes == (
        [f"loss_agg_mode {aggregation}: on the toy's fixed-length sequences token-mean's row"]
        if setting == VERL_K3_LOSS and aggregation != "token-mean"
        else []
    )
    text = "actor_rollout_ref.actor.use_kl_loss=True\nactor_rollout_ref.actor.loss_agg_mode=token-sum\n"
    with pytest.raises(ValueError, match="loss_agg_mode=token-sum` is not one of verl's audited settings"):
        read_config(write(tmp_path, "o.txt", text))
