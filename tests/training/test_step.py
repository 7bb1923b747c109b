"""The gradient the trainer applies equals that of the loss written out by hand, independently of
klrl.objective.kl / klrl.objective.policy_terms / klrl.objective.loss: every KL configuration, on- and off-policy, tiny model."""

import pytest
import torch

from klrl.objective.estimators import STANDARD_CONFIGS
from klrl.training import trainer as trainer_module
from klrl.training.rollout_queue import Batch
from klrl.training.sampling import completion_texts
from klrl.training.scoring import completion_logits, token_logp
from klrl.training.trainer import Trainer

from conftest import tiny_config

BETA = 0.5


def _parity_reward(completions, references):
    return [float(len(text) % 2) for text in completions]


def hand_written_loss(
    name, logp, ref, mu, rewards, mask, group, advantage, aggregation, ratio_clamp, weights=None, rows=None
):
    """The paper's objective for one batch, term by term, in float64. mu is None on-policy
    (then the importance weights are πθ/stopgrad(πθ): 1 with the gradient of log πθ); `weights`
    (the engine correction's) multiply every token's terms; `rows` (a minibatch) keeps only those
    rows' terms, over their own count of rows or tokens (advantages from the whole batch)."""
    logp, ref, mask, rewards = logp.double(), ref.double(), mask.double(), rewards.double()
    q = logp.detach() if mu is None else mu.double()
    delta = logp - ref
    parts = name.split("-") if name != "none" else ["k1", "none"]
    estimator, placement = parts[0], parts[1]
    correction = parts[2] if len(parts) == 3 else None
    k = {"k1": delta, "k2": 0.5 * delta**2, "k3": torch.exp(-delta) - 1 + delta}[estimator] * mask
    log_w = (logp - q) * mask  # log πθ/μ per token
    penalty = torch.zeros_like(rewards)
    kl_tokens = torch.zeros_like(logp)
    if correction is None:
        if placement in ("reward", "both"):
            penalty = BETA * k.detach().sum(-1)
        if placement in ("loss", "both"):
            kl_tokens = BETA * k
    elif correction == "tokis":
        kl_tokens = BETA * k * torch.exp(log_w)
    elif correction == "seqis":
        kl_tokens = BETA * k.detach() * torch.exp(log_w.sum(-1, keepdim=True))
    elif correction == "prefixis":
        kl_tokens = BETA * k.detach() * torch.exp(log_w.cumsum(-1))
    shaped = (rewards - penalty).reshape(-1, group)
    if advantage == "rloo":
        baseline = (shaped.sum(-1, keepdim=True) - shaped) / (group - 1)
    else:
        baseline = shaped.mean(-1, keepdim=True)
    adv = (shaped - baseline).reshape(-1, 1)
    ratio = torch.exp(logp - q)
    if ratio_clamp is not None:
        ratio = torch.minimum(ratio, torch.full_like(ratio, ratio_clamp))
    terms = (-ratio * adv + kl_tokens) * mask * (1.0 if weights is None else weights.double())
    if rows is not None:
        terms, mask = terms[rows], mask[rows]
    return terms.sum() / (mask.shape[0] if aggregation == "seq-sum" else mask.sum())


def learn_capturing_the_gradient(
    trainer, params, monkeypatch, rollout, rewards, step, update=-1, behaviour_logp=None
) -> tuple[dict, torch.Tensor]:
    """The learner's step on the rollout: its metrics and the gradient the optimizer applied (at
    its `update`-th optimizer step, the last by default)."""
    applied = []
    original_step = trainer.learner.optimizer.step

    def capture(*args, **kwargs):
        applied.append(torch.cat([p.grad.reshape(-1) for p in params]))
        return original_step(*args, **kwargs)

    monkeypatch.setattr(trainer.learner.optimizer, "step", capture)
    record = trainer.learner.learn(Batch(step, step, rollout, behaviour_logp, rewards))
    return record, applied[update]


@pytest.mark.parametrize("mode", ["on", "off"])
@pytest.mark.parametrize("name", STANDARD_CONFIGS)
def test_the_applied_gradient_is_the_hand_written_loss(tiny_base, arith_data, tmp_path, monkeypatch, name, mode):
    monkeypatch.setattr(trainer_module, "get_reward", lambda _: _parity_reward)
    off = mode == "off"
    settings = {  # off-policy: the paper's choices, micro-batches of 5 rows (the last one of 1)
        "advantage": "group-mean" if off else "rloo",
        "loss_aggregation": "token-mean" if off else "seq-sum",
        "ratio_clamp": 1.02 if off else None,
        "micro_batch_size": 5 if off else None,
    }
    config = tiny_config(
        tiny_base,
        arith_data,
        name,
        0.0 if name == "none" else BETA,
        reward="parity",
        async_lag=int(off),
        steps=3,
        lr=0.05,
        grad_clip=1e9,
        **settings,
    )
    trainer = Trainer(config, tmp_path)
    torch.manual_seed(0)  # a policy away from the reference, so that every KL term is non-zero
    trainer.policy.load_state_dict({k: v + 0.05 * torch.randn_like(v) for k, v in trainer.policy.state_dict().items()})
    theta0 = {name: tensor.clone() for name, tensor in trainer.policy.state_dict().items()}
    if off:  # one step, so that μ = θ0 lags the learner's θ1: step 1's rollout, queued by θ0 at step 0
        trainer.train_step()
        trainer.step = 1
    queued = trainer.actor.queue.popleft() if off else trainer.actor.sample(0, version=0)
    rollout = queued.rollout
    rewards = torch.tensor(_parity_reward(completion_texts(trainer.tokenizer, rollout), None))
    mask = rollout.completion_mask.float()
    assert 0 < mask.sum() < mask.numel()  # some completions end at EOS: padding is in play

    mu = None
    if off:  # μ's log-probs by hand: θ0's weights, put back for the scoring alone
        theta1 = {name: tensor.clone() for name, tensor in trainer.policy.state_dict().items()}
        trainer.policy.load_state_dict(theta0)
        with torch.no_grad():
            mu = token_logp(completion_logits(trainer.policy, rollout), rollout.completion_ids)
        trainer.policy.load_state_dict(theta1)
    trainer.policy.train()
    params = list(trainer.policy.parameters())
    logp = token_logp(completion_logits(trainer.policy, rollout), rollout.completion_ids)
    with torch.no_grad():
        ref = token_logp(completion_logits(trainer.reference, rollout), rollout.completion_ids)
    if off:
        assert (logp.detach() - mu).abs().max() > 1e-3
        assert torch.allclose(queued.behaviour_logp, mu, rtol=0, atol=1e-6)  # the queued log μ is θ0's
    loss = hand_written_loss(
        name,
        logp,
        ref,
        mu,
        rewards,
        mask,
        4,
        settings["advantage"],
        settings["loss_aggregation"],
        settings["ratio_clamp"],
    )
    expected = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])

    record, applied = learn_capturing_the_gradient(
        trainer, params, monkeypatch, rollout, rewards, trainer.step, behaviour_logp=queued.behaviour_logp
    )
    assert expected.norm() > 1e-3
    gap = (applied.double() - expected).norm() / expected.norm()
    assert gap < 1e-5, gap
    assert record["loss/total"] == pytest.approx(loss.item(), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("aggregation", ["seq-sum", "token-mean"])
def test_a_minibatchs_gradient_is_its_own_hand_written_loss(tiny_base, arith_data, tmp_path, monkeypatch, aggregation):
    """Two epochs of two minibatches, each over micro-batches of 3 rows: the first update's
    gradient is the hand-written loss of its minibatch's rows over the minibatch's own count of
    rows (seq-sum) or tokens (token-mean), with advantages from the whole batch. Dividing by the
    whole batch's count instead halves it, which AdamW's normalisation would hide from the
    trained weights but not from this gradient."""
    monkeypatch.setattr(trainer_module, "get_reward", lambda _: _parity_reward)
    config = tiny_config(
        tiny_base,
        arith_data,
        "k3-both",
        BETA,
        reward="parity",
        steps=2,
        lr=0.05,
        grad_clip=1e9,
        minibatches=2,
        ppo_epochs=2,
        micro_batch_size=3,
        loss_aggregation=aggregation,
    )
    trainer = Trainer(config, tmp_path)
    torch.manual_seed(0)
    trainer.policy.load_state_dict({k: v + 0.05 * torch.randn_like(v) for k, v in trainer.policy.state_dict().items()})
    rollout = trainer.actor.sample(0, version=0).rollout
    rewards = torch.tensor(_parity_reward(completion_texts(trainer.tokenizer, rollout), None))
    mask = rollout.completion_mask.float()
    first = trainer.learner.minibatches(mask.shape[0], 0, 0, mask.device)[0]
    assert len(first) == mask.shape[0] // 2 and 0 < mask[first].sum() < mask.sum()

    trainer.policy.train()
    params = list(trainer.policy.parameters())
    logp = token_logp(completion_logits(trainer.policy, rollout), rollout.completion_ids)
    with torch.no_grad():
        ref = token_logp(completion_logits(trainer.reference, rollout), rollout.completion_ids)
    loss = hand_written_loss("k3-both", logp, ref, None, rewards, mask, 4, "rloo", aggregation, None, rows=first)
    expected = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])

    _, applied = learn_capturing_the_gradient(trainer, params, monkeypatch, rollout, rewards, 0, update=0)
    assert expected.norm() > 1e-3
    gap = (applied.double() - expected).norm() / expected.norm()
    assert gap < 1e-5, gap
