"""The engine correction (klrl.objective.engine_correction), proven exactly on the toy policy: samples from
a perturbed engine policy, reweighted by μ/e on the policy term and the KL term, have the same
expected gradient as samples from μ, for every configuration on- and off-policy; without the
weights they do not; truncation and masking leave a bias only where they act."""

import pytest
import torch

from klrl.objective.engine_correction import EngineCorrection, engine_weights
from klrl.objective.estimators import STANDARD_CONFIGS
from klrl.objective.kl_config import KLConfig
from klrl.toy.exact import expected_gradient
from klrl_audit.targets import enumerate_sequences
from klrl_audit.toy import make_problem

CONFIGS = [name for name in STANDARD_CONFIGS if name != "none"]


def _engine(problem, mode: str, scale: float = 0.3, seed: int = 5) -> torch.Tensor:
    """The engine's policy: the trainer's μ (πθ on-policy, the stale μ off-policy) perturbed."""
    base = problem.theta if mode == "on" else problem.behaviour_theta
    return base + scale * torch.randn(base.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _rel(gradient, truth) -> float:
    return ((gradient - truth).norm() / truth.norm()).item()


@pytest.fixture(scope="module")
def problem():
    return make_problem(vocab=3, horizon=3, seed=0)


def _weights(problem, mode, engine, correction):
    e = enumerate_sequences(problem, mode, problem.theta)
    anchor_logp = e.logp if e.behaviour_logp is None else e.behaviour_logp
    return engine_weights(correction, anchor_logp, problem.space.token_logp(engine, e.seqs), e.mask)


@pytest.mark.parametrize("mode", ["on", "off"])
@pytest.mark.parametrize("name", CONFIGS)
def test_sequence_weights_remove_the_engine_bias_on_both_terms(problem, name, mode):
    config, engine = KLConfig.from_name(name, beta=1.0), _engine(problem, mode)
    truth = expected_gradient(problem, config, mode)
    weights, metrics = _weights(problem, mode, engine, EngineCorrection("sequence", "truncate", cap=1e6))
    assert (
        metrics["fraction_corrected"] == 0 and metrics["max_abs_log_ratio"] > 0.1
    )  # the cap does not act; the engines differ
    corrected = expected_gradient(problem, config, mode, engine, EngineCorrection("sequence", "truncate", cap=1e6))
    torch.testing.assert_close(corrected, truth, rtol=1e-9, atol=1e-12)
    assert _rel(expected_gradient(problem, config, mode, engine), truth) > 0.05


def test_token_weights_are_exact_for_one_token_completions_only(problem):
    config = KLConfig.from_name("k3-loss", beta=1.0)
    token = EngineCorrection("token", "truncate", cap=1e6)
    short = make_problem(vocab=4, horizon=1, seed=0)
    engine = _engine(short, "off")
    torch.testing.assert_close(
        expected_gradient(short, config, "off", engine, token),
        expected_gradient(short, config, "off"),
        rtol=1e-9,
        atol=1e-12,
    )
    engine = _engine(problem, "off")
    assert (
        _rel(expected_gradient(problem, config, "off", engine, token), expected_gradient(problem, config, "off")) > 0.01
    )


@pytest.mark.parametrize("mode", ["truncate", "mask"])
def test_a_cap_that_acts_leaves_a_bias_and_is_counted(problem, mode):
    config, engine = KLConfig.from_name("k1-reward", beta=1.0), _engine(problem, "off")
    capped = EngineCorrection("sequence", mode, cap=2.0)
    _, metrics = _weights(problem, "off", engine, capped)
    assert 0 < metrics["fraction_corrected"] < 1
    truth = expected_gradient(problem, config, "off")
    assert _rel(expected_gradient(problem, config, "off", engine, capped), truth) > 1e-4


def test_masking_drops_weights_outside_the_cap_and_truncation_caps_them():
    trainer = torch.tensor([[0.0, -1.0, -3.0]])
    engine = torch.tensor([[-1.0, -1.0, -1.0]])  # ratios e, 1, e⁻²
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the last token is padding
    masked, metrics = engine_weights(EngineCorrection("token", "mask", cap=2.0), trainer, engine, mask)
    assert masked.tolist() == [[0.0, 1.0, 0.0]] and metrics["fraction_corrected"] == 0.5
    truncated, _ = engine_weights(EngineCorrection("token", "truncate", cap=2.0), trainer, engine, mask)
    assert truncated.tolist() == [[2.0, 1.0, 0.0]]
    sequence, metrics = engine_weights(EngineCorrection("sequence", "truncate", cap=5.0), trainer, engine, mask)
    torch.testing.assert_close(sequence, torch.tensor([[torch.e, torch.e, 0.0]]))
    assert metrics["mean_abs_log_ratio"] == 0.5 and metrics["max_abs_log_ratio"] == 1.0


def test_a_bad_correction_is_a_one_line_error():
    with pytest.raises(ValueError, match="engine correction level: 'tok' is not one of token, sequence"):
        EngineCorrection("tok")
    with pytest.raises(ValueError, match="engine correction cap: 1.0 must be > 1"):
        EngineCorrection(cap=1.0)
