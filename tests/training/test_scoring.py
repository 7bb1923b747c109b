"""Scoring: the shared-prompt forward gives the whole-sequence forward's log-probs and gradient,
and two models with equal weights give equal log-probs whether or not theirs require grad."""

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.training.prompts import encode_prompts
from klrl.training.sampling import HFSampler
from klrl.training.scoring import completion_logits, token_logp

GROUP = 4


def _rollout(folder):
    """Groups of 4 samples of three prompts of different lengths (left padding), completions of
    different lengths (EOS mid-way, right padding)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    rows = [
        {"prompt": p}
        for p in ("12+30", "7-3", "Ann has 4 pens and gets 5 more. How many pens now?")
        for _ in range(GROUP)
    ]
    sampler = HFSampler((tokenizer.eos_token_id,), tokenizer.pad_token_id, max_new_tokens=8)
    rollout = sampler.sample(model, encode_prompts(tokenizer, rows), torch.Generator().manual_seed(3))
    lengths = rollout.completion_mask.sum(-1)
    assert lengths.min() < lengths.max() and rollout.prompt_mask.sum(-1).unique().numel() == 3
    return model, rollout


def _masked_logp(model, rollout, share_prompts):
    logp = token_logp(completion_logits(model, rollout, share_prompts=share_prompts), rollout.completion_ids)
    return logp * rollout.completion_mask


def test_shared_prompts_give_the_whole_forwards_log_probs_and_gradient(talkative_base):
    model, rollout = _rollout(talkative_base)
    gradients = {}
    for share in (False, True):
        model.zero_grad()
        logp = _masked_logp(model, rollout, share)
        (logp * torch.linspace(-1, 1, logp.numel()).reshape(logp.shape)).sum().backward()
        gradients[share] = (logp.detach(), [p.grad.clone() for p in model.parameters()])
    (whole, whole_grad), (shared, shared_grad) = gradients[False], gradients[True]
    assert whole.abs().sum() > 1
    assert torch.allclose(shared, whole, atol=1e-5, rtol=0)
    for a, b in zip(whole_grad, shared_grad, strict=True):
        assert torch.allclose(b, a, atol=1e-5 * a.abs().max().item(), rtol=1e-4)


def test_equal_weights_give_equal_log_probs_bit_for_bit(talkative_base):
    """What makes lag 1 at step 0 the on-policy update exactly: μ (frozen) and πθ (trainable)
    hold the same weights and must score the rollout identically."""
    policy, rollout = _rollout(talkative_base)
    frozen = AutoModelForCausalLM.from_pretrained(talkative_base).eval().requires_grad_(False)
    policy.train()
    with torch.enable_grad():
        trainable = _masked_logp(policy, rollout, share_prompts=True)
    with torch.no_grad():
        stale = _masked_logp(frozen, rollout, share_prompts=True)
    assert trainable.requires_grad
    assert torch.equal(trainable.detach(), stale)


def test_logits_are_those_of_the_sampling_temperature(talkative_base):
    """Scoring divides the logits by the temperature the tokens were drawn at (not at 1, where
    dividing is exact and skipped), so the log-probs are those of the sampling distribution."""
    model, rollout = _rollout(talkative_base)
    with torch.no_grad():
        plain = completion_logits(model, rollout)
        for temperature in (0.5, 2.0):
            assert torch.equal(completion_logits(model, rollout, temperature), plain / temperature)
