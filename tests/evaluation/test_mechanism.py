"""klrl.evaluation.mechanism: the exact per-prefix sums against sequence-level KLs found by
enumerating every completion of a five-token model pair, the forward KL on the reference's
samples, equal models at exactly zero, and the summary's arithmetic."""

import copy
import itertools
import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from klrl.evaluation.results_files import MECHANISM_KEYS
from klrl.evaluation.mechanism import mean_and_se, measure, rollout_sums, sampled_sums
from klrl.training.sampling import HFSampler, Rollout
from klrl.training.seeds import seeded_generator

VOCABULARY = 5
STOP = 0  # also the padding
PROMPT = [1, 2]
LENGTH = 2  # max_new_tokens: every completion is one or two tokens


def _model(seed: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=VOCABULARY,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=16,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # spread the next-token distributions, so that the two models differ widely
        for parameter in model.parameters():
            if parameter.dim() > 1:
                parameter.mul_(40.0)
    return model.eval()


@pytest.fixture(scope="module")
def pair() -> tuple[LlamaForCausalLM, LlamaForCausalLM]:
    return _model(1), _model(2)


def _next_log_probs(model, prefix: list[int], temperature: float = 1.0) -> torch.Tensor:
    """log p(·|prompt + prefix) in float64, from a plain forward of the whole sequence."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([PROMPT + prefix])).logits[0, -1].double()
    return torch.log_softmax(logits / temperature, dim=-1)


def _completions() -> list[list[int]]:
    """Every completion: a stop token first, or any first token then any second."""
    return [[STOP]] + [[first, second] for first, second in itertools.product(range(1, VOCABULARY), range(VOCABULARY))]


def _log_prob(model, completion: list[int]) -> float:
    return sum(_next_log_probs(model, completion[:t])[token].item() for t, token in enumerate(completion))


def _prefix_kl(model, other, completion: list[int], temperature: float = 1.0) -> float:
    """Σ_t KL(model‖other)(·|y<t) over the completion's positions, from the definition."""
    total = 0.0
    for t in range(len(completion)):
        log_p, log_q = (
            _next_log_probs(model, completion[:t], temperature),
            _next_log_probs(other, completion[:t], temperature),
        )
        total += (log_p.exp() * (log_p - log_q)).sum().item()
    return total


def _sequence_kl(model, other) -> float:
    """KL(model‖other) over whole completions, by enumeration."""
    return sum(math.exp(_log_prob(model, y)) * (_log_prob(model, y) - _log_prob(other, y)) for y in _completions())


def _expectation(model, value) -> tuple[float, float]:
    """E and Var of value(y) for y ~ model, by enumeration."""
    weights = [math.exp(_log_prob(model, y)) for y in _completions()]
    values = [value(y) for y in _completions()]
    mean = sum(w * v for w, v in zip(weights, values))
    return mean, sum(w * (v - mean) ** 2 for w, v in zip(weights, values))


def _rollout(completions: list[list[int]], masks: list[list[int]]) -> Rollout:
    rows = len(completions)
    return Rollout(
        torch.tensor([PROMPT] * rows), torch.ones(rows, len(PROMPT), dtype=torch.long),
        torch.tensor(completions), torch.tensor(masks),
    )  # fmt: skip


def _sampler(temperature: float = 1.0) -> HFSampler:
    return HFSampler((STOP,), STOP, LENGTH, temperature)


class DigitTokenizer:
    """A tokenizer of the five-token vocabulary: a prompt's digits are its ids (no chat template)."""

    chat_template = None

    def encode(self, text: str) -> list[int]:
        return [int(digit) for digit in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(str(token) for token in ids if not (skip_special_tokens and token == STOP))


def _first_token_is_answer(texts: list[str], answers: list[str]) -> list[float]:
    return [float(text[:1] == answer) for text, answer in zip(texts, answers)]


def test_the_prefix_sum_of_one_sequence_is_the_sum_of_its_exact_token_kls(pair):
    policy, reference = pair
    for temperature in (1.0, 0.7):
        sums = rollout_sums(policy, reference, _rollout([[3, 4], [STOP, STOP]], [[1, 1], [1, 0]]), temperature)
        assert sums["kl"][0].item() == pytest.approx(_prefix_kl(policy, reference, [3, 4], temperature), rel=1e-5)
        assert sums["kl"][1].item() == pytest.approx(_prefix_kl(policy, reference, [STOP], temperature), rel=1e-5)
        entropy = [-(p.exp() * p).sum().item() for p in (_next_log_probs(policy, t, temperature) for t in ([], [3]))]
        assert sums["entropy"][0].item() == pytest.approx(sum(entropy), rel=1e-5)
        assert sums["entropy"][1].item() == pytest.approx(entropy[0], rel=1e-5)


def test_equal_models_are_at_kl_exactly_zero(pair):
    policy = pair[0]
    summary = measure(
        policy, copy.deepcopy(policy), DigitTokenizer(), [{"prompt": "12", "answer": "3"}] * 3,
        _first_token_is_answer, _sampler(), beta=0.5, samples=4, seed=0, batch_size=2,
    )  # fmt: skip
    assert summary["kl_reverse"] == summary["kl_forward"] == summary["kl_reverse_se"] == summary["kl_forward_se"] == 0
    assert summary["objective"] == summary["reward"] and summary["objective_se"] == summary["reward_se"]
    assert summary["entropy"] > 0


@pytest.mark.slow
def test_the_mean_prefix_sums_estimate_the_sequence_level_kls_and_entropy(pair):
    """Over 4000 samples the means lie within 4 standard errors (each SE from the exact variance
    of the per-sequence sum, found by enumeration) of the exact sequence-level values."""
    policy, reference = pair
    n = 4000
    sums, _ = sampled_sums(policy, reference, _sampler(), [PROMPT] * n, seeded_generator(0, "test"), n)
    for name, exact, value in [
        ("kl", _sequence_kl(policy, reference), lambda y: _prefix_kl(policy, reference, y)),
        ("entropy", -_expectation(policy, lambda y: _log_prob(policy, y))[0], lambda y: _prefix_entropy(policy, y)),
    ]:
        mean, variance = _expectation(policy, value)
        assert mean == pytest.approx(exact, rel=1e-9)  # the chain rule
        assert abs(sums[name].mean().item() - exact) < 4 * math.sqrt(variance / n), name


def _prefix_entropy(model, completion: list[int]) -> float:
    return sum(
        -(p.exp() * p).sum().item() for p in (_next_log_probs(model, completion[:t]) for t in range(len(completion)))
    )


@pytest.mark.slow
def test_the_forward_kl_is_measured_on_the_references_samples(pair):
    """kl_forward estimates KL(πref‖π) over sequences, which needs prefixes from πref; Σ_t KL(πref‖π)
    at π's prefixes (what the trainer logs as forward_kl_policy_prefixes) is another number, more
    than 8 standard errors away for this pair."""
    policy, reference = pair
    prompts, samples = 2, 2000
    summary = measure(
        policy, reference, DigitTokenizer(), [{"prompt": "12", "answer": "3"}] * prompts,
        _first_token_is_answer, _sampler(), beta=0.5, samples=samples, seed=0, batch_size=prompts,
    )  # fmt: skip
    n = prompts * samples
    exact, variance = _expectation(reference, lambda y: _prefix_kl(reference, policy, y))
    assert exact == pytest.approx(_sequence_kl(reference, policy), rel=1e-9)
    at_policy_prefixes = _expectation(policy, lambda y: _prefix_kl(reference, policy, y))[0]
    se = math.sqrt(variance / n)
    assert abs(at_policy_prefixes - exact) > 8 * se
    assert abs(summary["kl_forward"] - exact) < 4 * se
    reverse, reverse_variance = _expectation(policy, lambda y: _prefix_kl(policy, reference, y))
    assert abs(summary["kl_reverse"] - reverse) < 4 * math.sqrt(reverse_variance / n)
    p_answer = math.exp(_next_log_probs(policy, [])[3].item())
    assert abs(summary["reward"] - p_answer) < 4 * math.sqrt(p_answer * (1 - p_answer) / n)
    assert summary["objective"] == pytest.approx(summary["reward"] - 0.5 * summary["kl_reverse"], abs=1e-12)


def test_the_measurement_is_fixed_by_its_seed(pair):
    policy, reference = pair
    rows = [{"prompt": "12", "answer": "3"}, {"prompt": "21", "answer": "4"}]

    def run(seed: int) -> dict:
        return measure(
            policy, reference, DigitTokenizer(), rows, _first_token_is_answer, _sampler(),
            beta=0.1, samples=8, seed=seed, batch_size=1,
        )  # fmt: skip

    first = run(0)
    assert set(first) == set(MECHANISM_KEYS) - {"task", "seconds"}
    assert (first["prompts"], first["samples"], first["beta"]) == (2, 8, 0.1)
    assert run(0) == first
    assert run(1)["kl_reverse"] != first["kl_reverse"]


def test_the_standard_error_is_that_of_the_per_prompt_means():
    mean, se = mean_and_se(torch.tensor([1.0, 2.0, 3.0, 6.0], dtype=torch.float64))
    assert mean == 3.0
    assert se == pytest.approx(math.sqrt(14 / 3) / 2, rel=1e-12)  # sample SD (ddof 1) over √4
    assert mean_and_se(torch.tensor([2.5], dtype=torch.float64)) == (2.5, None)


def test_the_standard_errors_cluster_each_prompts_samples(pair):
    """Every sample of the first prompt earns 1, of the second 0: the per-prompt means are 1 and 0,
    so reward_se is SD([1, 0]) / √2 = 0.5 (over 16 independent samples it would be 0.13)."""
    policy, reference = pair
    rows = [{"prompt": "12", "answer": "yes"}, {"prompt": "21", "answer": "no"}]
    summary = measure(
        policy, reference, DigitTokenizer(), rows, lambda texts, answers: [float(a == "yes") for a in answers],
        _sampler(), beta=0.0, samples=8, seed=0, batch_size=2,
    )  # fmt: skip
    assert (summary["reward"], summary["reward_se"]) == (0.5, pytest.approx(0.5, rel=1e-12))
    assert (summary["objective"], summary["objective_se"]) == (0.5, pytest.approx(0.5, rel=1e-12))
