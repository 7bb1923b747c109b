"""OpenRLHF's own KL code under `klrl audit` (run in .venv-audit-openrlhf by `make test-audit`):
its rows equal klrl's exact gradients for the configurations both name, the findings hold, a bug
planted in a copy of its function (the importance weight dropped) changes the row, and the empty
flash-attn stand-in is never called."""

import inspect

import pytest
import torch

from audit.library_env import require

require("openrlhf")

from klrl.audit import openrlhf_adapter  # noqa: E402
from klrl.audit.gradients import audit_rows, expected_gradient  # noqa: E402
from klrl.objective.kl_config import KLConfig  # noqa: E402
from klrl.toy import exact  # noqa: E402
from klrl.toy.policy import make_problem  # noqa: E402

VERSION = "test"
UNBIASED = "--algo.kl.use_loss --algo.kl.estimator k3 --algo.kl.unbiased_gradient"


@pytest.fixture(scope="module")
def problem():
    return make_problem(vocab=2, horizon=3, seed=1)


@pytest.mark.parametrize(
    ("setting", "name"),
    [
        (lambda: openrlhf_adapter.reward_setting(VERSION, "k1"), "k1-reward"),
        (lambda: openrlhf_adapter.loss_setting(VERSION, "k3"), "k3-loss"),
        (lambda: openrlhf_adapter.loss_setting(VERSION, "k1"), "k1-loss"),
    ],
)
def test_rows_equal_klrl_exact_gradient(problem, setting, name):
    ours = exact.expected_gradient(problem, KLConfig.from_name(name, beta=1.0), "on")
    # OpenRLHF computes its KL in float32 (compute_approx_kl casts with .float()): equal to float32 precision
    torch.testing.assert_close(expected_gradient(problem, setting(), "on"), ours, rtol=1e-6, atol=1e-9)


def _rows():
    settings = [openrlhf_adapter.loss_setting(VERSION, "k3"), openrlhf_adapter.loss_setting(VERSION, "k3", True)]
    return {(row["setting"], row["mode"]): row for row in audit_rows(settings, 2, 3, 1)}


def test_findings_and_a_dropped_importance_weight(monkeypatch):
    rows = _rows()
    assert rows[("--algo.kl.use_loss --algo.kl.estimator k3", "on")]["estimates"] == "token-forward-kl"
    assert [rows[(UNBIASED, mode)]["estimates"] for mode in ("on", "off", "mismatch")] == [
        "token-reverse-kl",
        "token-reverse-kl",
        "other",
    ]
    from openrlhf.models import utils

    weight = "w = (log_probs.float() - log_probs_old.float()).exp().clamp(max=KL_IS_WEIGHT_CLIP).detach()"
    source = inspect.getsource(utils.compute_approx_kl)
    assert weight in source
    namespace = dict(vars(utils))
    exec(source.replace(weight, "w = 1.0"), namespace)
    monkeypatch.setattr(utils, "compute_approx_kl", namespace["compute_approx_kl"])
    planted = _rows()
    assert planted[(UNBIASED, "on")]["estimates"] == "token-reverse-kl"
    assert planted[(UNBIASED, "off")]["estimates"] == "other"


def test_the_flash_attn_stand_in_is_imported_and_never_called(problem):
    import flash_attn
    from openrlhf.models import ring_attn_utils

    assert flash_attn.STUB and ring_attn_utils.unpad_input is flash_attn.bert_padding.unpad_input
    with pytest.raises(RuntimeError, match="empty stand-in"):
        ring_attn_utils.unpad_input()
    rows = audit_rows(openrlhf_adapter.settings(), 2, 2, 1)  # every setting: a call to the stand-in would raise
    assert len(rows) == 3 * len(openrlhf_adapter.settings())
