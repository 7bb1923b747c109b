"""verl's own KL code under `klrl audit` (run in .venv-audit-verl by `make test-audit`): its rows
equal klrl's exact gradients for the configurations both name, the findings hold, and a bug planted
in a copy of verl's function (a sign flip, the clamp removed) changes the row."""

import dataclasses

import pytest
import torch

from audit.library_env import require

require("verl")

from klrl.audit import verl_adapter  # noqa: E402
from klrl.audit.gradients import audit_rows  # noqa: E402
from klrl_audit import expected_gradient  # noqa: E402
from klrl.objective.kl_config import KLConfig  # noqa: E402
from klrl.toy import exact  # noqa: E402
from klrl_audit.targets import token_kl_gradient  # noqa: E402
from klrl_audit.toy import make_problem  # noqa: E402

VERSION = "test"


@pytest.fixture(scope="module")
def problem():
    return make_problem(vocab=2, horizon=3, seed=1)


@pytest.mark.parametrize(
    ("setting", "name", "mode"),
    [
        (lambda: verl_adapter.reward_setting(VERSION, "kl", "rloo"), "k1-reward", "on"),
        (lambda: verl_adapter.loss_setting(VERSION, "k1"), "k1-loss", "on"),
        (lambda: verl_adapter.loss_setting(VERSION, "low_var_kl"), "k3-loss", "on"),
        (lambda: verl_adapter.loss_setting(VERSION, "k2"), "k2-loss", "on"),
        (lambda: verl_adapter.loss_setting(VERSION, "k2"), "k2-loss", "off"),
    ],
)
def test_rows_equal_klrl_exact_gradient(problem, setting, name, mode):
    ours = exact.expected_gradient(problem, KLConfig.from_name(name, beta=1.0), mode)
    audited = setting()
    torch.testing.assert_close(
        expected_gradient(audited.loss, mode, problem, audited.tokens_averaged), ours, rtol=1e-9, atol=1e-12
    )


def _row(problem_or_rows, setting_name, mode):
    return next(row for row in problem_or_rows if row["setting"] == setting_name and row["mode"] == mode)


def test_findings(problem):
    rows = audit_rows(
        [verl_adapter.loss_setting(VERSION, "k1"), verl_adapter.loss_setting(VERSION, "low_var_kl")], 2, 3, 1
    )
    assert _row(rows, "use_kl_loss=True, kl_loss_type=k1, loss_agg_mode=token-mean", "on")["estimates"] == "zero"
    k3 = "use_kl_loss=True, kl_loss_type=low_var_kl, loss_agg_mode=token-mean"
    assert _row(rows, k3, "on")["estimates"] == "token-forward-kl"
    assert _row(rows, k3, "off")["estimates"] == "other"


def _far_reference(problem):
    """πθ gives token 0 little mass and πref much (πref/πθ in the hundreds): k3's clamp at 10 acts there."""
    theta, ref = problem.theta.clone(), problem.theta.clone()
    theta[:, 0] -= 4.0
    ref[:, 0] += 2.0
    return dataclasses.replace(problem, theta=theta, ref_theta=ref)


def _planted(monkeypatch, edit):
    """verl's kl_penalty_forward, its source edited by `edit`, in place of the library's."""
    import inspect

    from verl.trainer.ppo import core_algos

    source = edit(inspect.getsource(core_algos.kl_penalty_forward))
    namespace = dict(vars(core_algos))
    exec(source, namespace)
    monkeypatch.setattr(core_algos, "kl_penalty_forward", namespace["kl_penalty_forward"])


def test_k3_clamp_zeroes_the_gradient_and_a_removed_clamp_is_caught(problem, monkeypatch):
    far = _far_reference(make_problem(vocab=5, horizon=1, seed=0))
    setting = verl_adapter.loss_setting(VERSION, "low_var_kl")
    targets = {"forward": token_kl_gradient(far, "on", "forward")}
    clamped = expected_gradient(setting.loss, "on", far, setting.tokens_averaged)
    assert (clamped - targets["forward"]).norm() > 0.1 * targets["forward"].norm()
    _planted(monkeypatch, lambda source: source.replace("return torch.clamp(kld, min=-10, max=10)", "return kld"))
    torch.testing.assert_close(
        expected_gradient(setting.loss, "on", far, setting.tokens_averaged), targets["forward"], rtol=1e-9, atol=1e-12
    )


def test_a_flipped_sign_is_caught(problem, monkeypatch):
    setting = verl_adapter.loss_setting(VERSION, "k2")
    before = audit_rows([setting], 2, 3, 1)
    _planted(
        monkeypatch,
        lambda source: source.replace(
            "return 0.5 * (logprob - ref_logprob).square()", "return -0.5 * (logprob - ref_logprob).square()"
        ),
    )
    after = audit_rows([setting], 2, 3, 1)
    assert before[0]["estimates"] == "token-reverse-kl"
    assert after[0]["estimates"] == "other"
    assert after[0]["rel_bias"] > 1.5


def _own_config(tmp_path, **changes):
    """verl's own config, the installed `_generated_ppo_trainer.yaml`, with `changes` (dotted keys, __ for .) set."""
    import importlib.util
    from pathlib import Path

    import yaml

    (package,) = importlib.util.find_spec("verl").submodule_search_locations
    config = yaml.safe_load((Path(package) / "trainer/config/_generated_ppo_trainer.yaml").read_text())
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        node = config
        for parent in parents:
            node = node[parent]
        assert key in node  # a key verl's own config has
        node[key] = value
    path = tmp_path / "ppo_trainer.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_its_own_config_is_the_setting_it_states(tmp_path):
    from klrl.audit.user_config import read_config

    assert read_config(_own_config(tmp_path)).no_kl == (
        "actor_rollout_ref.actor.use_kl_loss and algorithm.use_kl_in_reward are false"
    )
    audited = {setting.name for setting in verl_adapter.settings()}
    loss = "actor_rollout_ref__actor__"
    cases = [
        ({loss + "use_kl_loss": True}, "use_kl_loss=True, kl_loss_type=low_var_kl, loss_agg_mode=token-mean"),
        (
            {loss + "use_kl_loss": True, loss + "kl_loss_type": "k3+"},
            "use_kl_loss=True, kl_loss_type=k3+, loss_agg_mode=token-mean",
        ),
        (
            {"algorithm__use_kl_in_reward": True, "algorithm__adv_estimator": "rloo"},
            "use_kl_in_reward=True, kl_penalty=kl, adv_estimator=rloo",
        ),
        (
            {
                "algorithm__use_kl_in_reward": True,
                "algorithm__adv_estimator": "rloo",
                "algorithm__rollout_correction__rollout_is": "sequence",
            },
            "use_kl_in_reward=True, kl_penalty=kl, adv_estimator=rloo, rollout_correction.rollout_is=sequence",
        ),
    ]
    for changes, name in cases:
        assert read_config(_own_config(tmp_path, **changes)).setting == name
        assert name in audited
    # GRPO's default normalisation by the group's std is not an audited setting
    grpo = "use_kl_in_reward=True, kl_penalty=kl, adv_estimator=grpo, norm_adv_by_std_in_grpo=True"
    with pytest.raises(ValueError, match=f"`{grpo}` is not one of verl's audited settings"):
        read_config(_own_config(tmp_path, algorithm__use_kl_in_reward=True, algorithm__adv_estimator="grpo"))
    assert grpo not in audited


def test_the_report_on_its_own_config(tmp_path):
    from klrl.audit.gradients import setting_rows
    from klrl.audit.report import setting_report
    from klrl.audit.user_config import read_config

    path = _own_config(
        tmp_path, actor_rollout_ref__actor__use_kl_loss=True, actor_rollout_ref__actor__kl_loss_type="k1"
    )
    name = read_config(path).setting
    settings = [
        verl_adapter.loss_setting(VERSION, "k1"),
        verl_adapter.loss_setting(VERSION, "k2"),
        verl_adapter.reward_setting(VERSION, "kl", "rloo"),
    ]
    rows = setting_rows(settings, name, 2, 3, 1)
    assert {(row["setting"], row["mode"]) for row in rows} == {
        *((name, mode) for mode in ("on", "off", "mismatch")),
        (settings[1].name, "on"),
        *((settings[2].name, mode) for mode in ("on", "off", "mismatch")),
    }
    report = setting_report(str(path), name, rows)
    assert f"| {name} | biased, 1.000 (zero) |" in report
    assert "On-policy its expected gradient is zero, not the sequence's reverse KL's" in report
    advice = report.split("change to one of verl's settings:")[1]
    assert f"| {settings[2].name} | unbiased, 0.000 (sequence-reverse-kl) |" in advice
    assert advice.endswith(f"(biased for the sequence's): `{settings[1].name}`.\n")
    with pytest.raises(ValueError, match="^'use_kl_loss=True, kl_loss_type=abs, loss_agg_mode=token-mean' is not one"):
        setting_rows(settings, verl_adapter.loss_name("abs", "token-mean"), 2, 3, 1)


def test_the_readers_tables_are_the_installed_verls():
    """klrl.audit.verl_config's key lists and KL defaults equal the installed _generated_ppo_trainer.yaml's."""
    import importlib.metadata
    import importlib.util
    from pathlib import Path

    import yaml

    from klrl.audit import verl_config

    assert importlib.metadata.version("verl") == verl_config.VERSION
    (package,) = importlib.util.find_spec("verl").submodule_search_locations
    text = (Path(package) / "trainer/config/_generated_ppo_trainer.yaml").read_text()
    config = yaml.safe_load(text)

    def keys(node, prefix=""):
        return [
            name
            for key, value in node.items()
            for name in [prefix + key, *(keys(value, f"{prefix}{key}.") if isinstance(value, dict) else [])]
        ]

    assert set(config) == set(verl_config.SECTIONS) - {"defaults", "hydra"}
    assert tuple(config["actor_rollout_ref"]) == verl_config.ACTOR_ROLLOUT_REF
    actor = {
        key
        for key in keys(config["actor_rollout_ref"]["actor"])
        if key.count(".") == 0 or key.startswith("policy_loss.")
    }
    assert actor | {"megatron"} == set(verl_config.ACTOR_KEYS)  # megatron: _generated_ppo_megatron_trainer.yaml's
    assert set(keys(config["algorithm"])) == set(verl_config.ALGORITHM_KEYS)
    from verl.trainer.ppo import core_algos

    assert sorted(core_algos.ADV_ESTIMATOR_REGISTRY) == verl_config.ADV_ESTIMATORS
    lines = text.splitlines()
    for dotted, (value, line) in verl_config.DEFAULTS.items():
        node = config
        for part in dotted.split("."):
            node = node[part]
        assert node == value, dotted
        assert lines[line - 1].strip().startswith(dotted.split(".")[-1] + ":"), dotted


def test_the_maintainers_page_example_and_the_assertion_on_the_audited_settings():
    """klrl-audit's verl example runs as written; `assert_kl_gradient` gives docs/audit.md's verdicts."""
    from klrl_audit import assert_kl_gradient

    from audit.readme_examples import example

    example("verl")["test_verl_kl_loss_gradients"](assert_kl_gradient)
    in_reward = verl_adapter.reward_setting(VERSION, "kl", "rloo")
    assert_kl_gradient(in_reward.loss, "sequence-reverse-kl", "on", tokens_averaged=True)
    with pytest.raises(AssertionError, match="off-policy follows none of the named targets"):
        assert_kl_gradient(in_reward.loss, "sequence-reverse-kl", "off", tokens_averaged=True)
