"""The registry of estimators, corrections and standard configurations (klrl.estimators): the
README's "How to add an estimator" followed with a dummy one, and the named errors of an
incomplete entry."""

import sys
from pathlib import Path

import pytest
import torch
import yaml

from klrl import estimators
from klrl.choices import KLConfig, check_standard_configs
from klrl.claims import claims_markdown, describe
from klrl.config_check import check_config, registry_problem
from klrl.estimators import TOKEN_FORWARD_KL, Estimator, GradientClaim, RegistryError, check_registry
from klrl.grid import expand_grid
from klrl.kl import token_kl
from klrl.toy.exact import expected_gradient, token_kl_gradient
from klrl.toy.policy import make_problem

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _naive_k3(delta):
    return (-delta).exp() - 1 + delta


# K3 by its textbook formula, under another name: its claims are K3's, so the exact toy check applies
K4 = Estimator(
    "k4", "K4_t = exp(−δ_t) − 1 + δ_t", _naive_k3, unbiased_value=True,
    on_policy={
        "reward": GradientClaim(estimators.OTHER, "β E[(Σ_t K4_t) ∇log πθ(y)]"),
        "loss": GradientClaim(TOKEN_FORWARD_KL, "β E[Σ_t (1 − ρ_t) ∇log πθ(y_t)] = β Σ_t ∇KL(πref‖πθ) per prefix"),
        "both": GradientClaim(estimators.SEQUENCE_REVERSE_KL, "β ∇E[Σ_t K4_t]"),
    },
)


@pytest.fixture
def with_k4(monkeypatch):
    """Steps 1 and 2 of the recipe: the estimator in ESTIMATORS, its configuration in STANDARD_CONFIGS."""
    monkeypatch.setitem(estimators.ESTIMATORS, "k4", K4)
    monkeypatch.setitem(estimators.STANDARD_CONFIGS, "k4-loss", "#00a0a0")
    check_registry()
    check_standard_configs()


def test_a_new_estimator_is_a_configuration_the_loss_describe_and_the_figures_know(with_k4):
    config = KLConfig.from_name("k4-loss", beta=0.1)
    assert (config.estimator, config.placement, config.name) == ("k4", "loss", "k4-loss")
    assert KLConfig.from_name("k4-loss-tokis", beta=0.1).correction == "token-is"  # its value is unbiased
    delta = torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64)
    assert torch.allclose(token_kl(delta, torch.zeros(3), "k4").values, token_kl(delta, torch.zeros(3), "k3").values)
    assert describe(config)["on"].target == TOKEN_FORWARD_KL
    assert describe(config)["off"].gradient == "β E[Σ_t (1 − ρ_t) ∇log πθ(y_t)] = β Σ_t ∇KL(πref‖πθ) per prefix, with y ~ μ and token weights ω_t on the score term"
    assert claims_markdown().splitlines()[-1].startswith("| `k4-loss` | biased (token-forward-kl): ")
    sys.path.insert(0, str(ROOT / "paper_figures"))
    try:
        from helpers import style
    finally:
        sys.path.remove(str(ROOT / "paper_figures"))
    assert style.color("k4-loss") == "#00a0a0"


def test_a_new_estimators_claim_holds_exactly_on_the_toy_policy(with_k4):
    problem = make_problem(vocab=3, horizon=3, seed=0)
    config = KLConfig.from_name("k4-loss", beta=1.0)
    assert torch.allclose(expected_gradient(problem, config, "on"), token_kl_gradient(problem, "on", "forward"), atol=1e-10)


def test_the_workflow_refuses_a_schema_that_lacks_a_new_configuration_then_runs_its_cells(with_k4, tmp_path):
    schema = yaml.safe_load(SCHEMA.read_text())
    assert registry_problem(schema, SCHEMA) == (
        f"{SCHEMA}: $defs.kl.enum lacks 'k4-loss' of klrl.estimators.STANDARD_CONFIGS; it must be [{', '.join(estimators.STANDARD_CONFIGS)}]"
    )
    schema["$defs"]["kl"]["enum"].append("k4-loss")  # step 3: the schema's list
    amended = tmp_path / "schema.yaml"
    amended.write_text(yaml.safe_dump(schema, allow_unicode=True))
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    config["groups"][0]["kl"] = ["k4-loss"]
    check_config(config, amended)
    cells = expand_grid(config)
    assert cells["tiny__k4-loss__b0.1__on__s0"].train["kl"]["name"] == "k4-loss"


def test_an_incomplete_or_clashing_entry_is_a_named_error(monkeypatch):
    monkeypatch.setitem(estimators.ESTIMATORS, "k5", Estimator("k5", "K5", _naive_k3, False, on_policy={"reward": K4.on_policy["reward"]}))
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
    with pytest.raises(RegistryError, match="standard configuration 'k2-reward-seqis' is not a valid KLConfig .*needs placement 'reward' and estimator 'k1'"):
        check_standard_configs()
