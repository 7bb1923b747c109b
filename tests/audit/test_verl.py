"""verl's own KL code under `klrl audit` (run in .venv-audit-verl by `make test-audit`): its rows
equal klrl's exact gradients for the configurations both name, the findings hold, and a bug planted
in a copy of verl's function (a sign flip, the clamp removed) changes the row."""

import dataclasses

import pytest
import torch

from audit.library_env import require

require("verl")

from klrl.audit import verl_adapter  # noqa: E402
from klrl.audit.gradients import audit_rows, expected_gradient  # noqa: E402
from klrl.objective.kl_config import KLConfig  # noqa: E402
from klrl.toy import exact  # noqa: E402
from klrl.toy.policy import make_problem  # noqa: E402

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
    torch.testing.assert_close(expected_gradient(problem, setting(), mode), ours, rtol=1e-9, atol=1e-12)


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
    targets = {"forward": exact.token_kl_gradient(far, "on", "forward")}
    clamped = expected_gradient(far, setting, "on")
    assert (clamped - targets["forward"]).norm() > 0.1 * targets["forward"].norm()
    _planted(monkeypatch, lambda source: source.replace("return torch.clamp(kld, min=-10, max=10)", "return kld"))
    torch.testing.assert_close(expected_gradient(far, setting, "on"), targets["forward"], rtol=1e-9, atol=1e-12)


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
