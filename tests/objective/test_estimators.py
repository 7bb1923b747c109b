"""The registry of estimators, corrections and standard configurations (klrl.objective.estimators): an
incomplete or contradicting entry is an error naming it (tests/test_extending.py adds a whole one)."""

import pytest

from klrl.objective import estimators
from klrl.objective.kl_config import check_standard_configs
from klrl.objective.estimators import Estimator, RegistryError, check_registry


def _naive_k3(delta):
    return (-delta).exp() - 1 + delta


K4 = Estimator(
    "k4",
    "K4_t = exp(−δ_t) − 1 + δ_t",
    _naive_k3,
    unbiased_value=True,
    on_policy={placement: estimators.ESTIMATORS["k3"].on_policy[placement] for placement in ("reward", "loss", "both")},
)


def test_an_incomplete_or_clashing_entry_is_a_named_error(monkeypatch):
    monkeypatch.setitem(
        estimators.ESTIMATORS,
        "k5",
        Estimator("k5", "K5", _naive_k3, False, on_policy={"reward": K4.on_policy["reward"]}),
    )
    with pytest.raises(RegistryError, match="estimator 'k5' has no on-policy claim for placement 'loss'"):
        check_registry()
    monkeypatch.delitem(estimators.ESTIMATORS, "k5")
    monkeypatch.setitem(estimators.STANDARD_CONFIGS, "k5-loss", "#123456")
    with pytest.raises(RegistryError, match="standard configuration 'k5-loss' is not <estimator>-<placement>"):
        check_registry()
    monkeypatch.setitem(estimators.STANDARD_CONFIGS, "k5-loss", estimators.STANDARD_CONFIGS["k1-loss"])
    monkeypatch.setitem(estimators.ESTIMATORS, "k5", K4)
    with pytest.raises(RegistryError, match="'k5-loss' and 'k1-loss' share the colour"):
        check_registry()
    monkeypatch.setitem(estimators.STANDARD_CONFIGS, "k5-loss", "#123456")
    monkeypatch.setitem(estimators.STANDARD_CONFIGS, "k2-reward-seqis", "#654321")
    with pytest.raises(
        RegistryError,
        match="standard configuration 'k2-reward-seqis' is not a valid KLConfig .*needs placement 'reward' and estimator 'k1'",
    ):
        check_standard_configs()
