"""The trainer: updates, KL gradients through the real loop, the off-policy lag, seeds, divergence."""

import json
import re
import subprocess
import sys
import time

import pytest
import torch
import yaml
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from klrl.objective.kl import kl_terms
from klrl.objective.policy_terms import aggregate
from klrl.training import trainer as trainer_module
from klrl.training.checkpoint import checkpoint_folders
from klrl.training.sampling import HFSampler
from klrl.training.scoring import completion_logits, token_logp
from klrl.core.provenance import source_commit, utc_now
from klrl.training.record import read_metrics
from klrl.training.trainer import Trainer

from conftest import tiny_config


def _parity_reward(completions, references):
    """A reward with signal on an untrained model: odd-length completions score 1."""
    return [float(len(text) % 2) for text in completions]


@pytest.fixture
def parity_reward(monkeypatch):
    monkeypatch.setattr(trainer_module, "get_reward", lambda name: _parity_reward)


def _weights(model):
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def _strip_times(records):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]


def test_every_parameter_changes_after_one_step(tiny_base, arith_data, tmp_path, parity_reward):
    trainer = Trainer(tiny_config(tiny_base, arith_data, steps=1), tmp_path)
    before = _weights(trainer.policy)
    trainer.run()
    after = _weights(trainer.policy)
    unchanged = [name for name in before if torch.equal(before[name], after[name])]
    assert unchanged == []
    reference = _weights(trainer.reference)
    assert all(torch.equal(before[name], reference[name]) for name in before)


@pytest.mark.parametrize("name", ["k1-loss", "k2-loss", "k3-loss", "k1-loss-tokis", "k3-loss-tokis"])
def test_in_loss_kl_gradient_is_what_klrl_kl_prescribes(tiny_base, arith_data, tmp_path, monkeypatch, name):
    # a constant reward: every advantage is 0, so the whole gradient is the KL loss term's
    monkeypatch.setattr(trainer_module, "get_reward", lambda _: lambda c, r: [1.0] * len(c))
    trainer = Trainer(tiny_config(tiny_base, arith_data, kl=name, beta=0.5, grad_clip=1e9), tmp_path)
    torch.manual_seed(0)
    trainer.policy.load_state_dict({k: v + 0.05 * torch.randn_like(v) for k, v in trainer.policy.state_dict().items()})
    start = _weights(trainer.policy)
    captured = {}
    original_step = trainer.learner.optimizer.step

    def capture(*args, **kwargs):
        captured.update({n: p.grad.clone() for n, p in trainer.policy.named_parameters()})
        return original_step(*args, **kwargs)

    monkeypatch.setattr(trainer.learner.optimizer, "step", capture)
    trainer.train_step()
    # the same gradient by hand, from the same rollout (the sampler is seeded by the step)
    trainer.policy.load_state_dict(start)
    rollout = trainer.actor.sample(0, version=0).rollout
    mask = rollout.completion_mask.float()
    ref_logp = token_logp(completion_logits(trainer.reference, rollout), rollout.completion_ids).detach()
    logp = token_logp(completion_logits(trainer.policy, rollout), rollout.completion_ids)
    terms = kl_terms(trainer.learner.loss.kl, logp, ref_logp, mask)
    expected = torch.autograd.grad(aggregate(terms.loss_tokens, mask), list(trainer.policy.parameters()))
    for (param_name, _), grad in zip(trainer.policy.named_parameters(), expected):
        assert torch.allclose(captured[param_name], grad, atol=1e-7, rtol=1e-4), param_name
    assert sum(g.abs().sum() for g in expected) > 0


def test_reward_placement_shapes_the_advantage_not_the_loss(tiny_base, arith_data, tmp_path, monkeypatch):
    monkeypatch.setattr(trainer_module, "get_reward", lambda _: lambda c, r: [1.0] * len(c))
    trainer = Trainer(tiny_config(tiny_base, arith_data, kl="k1-reward", beta=0.5), tmp_path)
    torch.manual_seed(0)
    trainer.policy.load_state_dict({k: v + 0.05 * torch.randn_like(v) for k, v in trainer.policy.state_dict().items()})
    record = trainer.train_step()
    assert record["loss/kl"] == 0.0
    assert record["kl/reward_penalty_mean"] != 0.0
    assert record["rollout/advantage_abs_mean"] > 0  # the constant reward alone would give 0


def test_lag_zero_is_the_on_policy_path_and_lag_one_is_not(tiny_base, arith_data, tmp_path, parity_reward):
    runs = {}
    for lag in (0, 1):
        trainer = Trainer(
            tiny_config(tiny_base, arith_data, async_lag=lag, kl="k3-loss", beta=0.1, steps=1), tmp_path / f"one{lag}"
        )
        trainer.run()
        runs[("one", lag)] = _weights(trainer.policy)
        trainer = Trainer(
            tiny_config(tiny_base, arith_data, async_lag=lag, kl="k3-loss", beta=0.1, steps=3), tmp_path / f"three{lag}"
        )
        trainer.run()
        runs[("three", lag)] = _weights(trainer.policy)
    # at step 0 the rollout comes from the learner's own weights: the off-policy machinery (the
    # queued log μ, ratios) must reduce exactly to the on-policy update
    assert all(torch.equal(runs[("one", 0)][n], runs[("one", 1)][n]) for n in runs[("one", 0)])
    assert not all(torch.equal(runs[("three", 0)][n], runs[("three", 1)][n]) for n in runs[("three", 0)])
    records = read_metrics(tmp_path / "three1" / "metrics.jsonl")
    assert records[0]["is/ratio_max"] == pytest.approx(1.0)
    assert records[2]["is/ratio_max"] != pytest.approx(1.0)


def test_same_seed_same_run_other_seed_other_run(tiny_base, arith_data, tmp_path, parity_reward):
    histories = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        Trainer(tiny_config(tiny_base, arith_data, seed=seed, kl="k1-reward", beta=0.1), tmp_path / name).run()
        histories[name] = _strip_times(read_metrics(tmp_path / name / "metrics.jsonl"))
    assert histories["a"] == histories["b"]
    assert histories["a"] != histories["c"]


def test_non_finite_loss_stops_the_cell_cleanly(tiny_base, arith_data, tmp_path, monkeypatch):
    monkeypatch.setattr(trainer_module, "get_reward", lambda _: lambda c, r: [float("nan")] * len(c))
    status = Trainer(tiny_config(tiny_base, arith_data, steps=5), tmp_path).run()
    assert status == "diverged"
    record = json.loads((tmp_path / "status.json").read_text())
    assert record["status"] == "diverged" and record["step"] == 0
    assert "non-finite" in record["reason"]
    # a short hash in a checkout and in a `git archive` alike (tests/core/test_provenance.py)
    assert record["commit"] == source_commit() and re.fullmatch(r"[0-9a-f]{7,}", record["commit"])
    assert record["finished"][:10] == utc_now()[:10]
    assert len(read_metrics(tmp_path / "metrics.jsonl")) == 1
    assert (tmp_path / "final" / "config.json").exists()


def test_collapse_detector_stops_a_collapsing_cell(tiny_base, arith_data, tmp_path, monkeypatch):
    calls = []

    def collapsing(completions, references):
        calls.append(1)
        return [1.0 if len(calls) <= 2 else 0.0] * len(completions)

    monkeypatch.setattr(trainer_module, "get_reward", lambda _: collapsing)
    config = tiny_config(tiny_base, arith_data, steps=10, collapse_window=2, collapse_ratio=0.5, eval_size=1)
    trainer = Trainer(config, tmp_path)
    trainer.actor.evaluate = lambda rows, version: 0.0  # keep the reward calls to training rollouts
    assert trainer.run() == "diverged"
    record = json.loads((tmp_path / "status.json").read_text())
    assert record["step"] == 3 and record["reason"].startswith("collapse at step 3")
    assert [r["rollout/accuracy"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1.0, 1.0, 0.0, 0.0]


@pytest.mark.slow
def test_resume_after_a_real_kill_equals_an_uninterrupted_run(tiny_base, arith_data, tmp_path):
    config = tiny_config(
        tiny_base, arith_data, steps=40, checkpoint_every=7, eval_every=10, kl="k3-loss", beta=0.1, async_lag=2
    )
    path = tmp_path / "cell.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    command = [sys.executable, "-m", "klrl", "train", "--config", str(path), "--out"]
    subprocess.run([*command, str(tmp_path / "whole")], check=True, capture_output=True)

    cut = tmp_path / "cut"
    process = subprocess.Popen([*command, str(cut)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill between checkpoints, past the second one
        lines = (cut / "metrics.jsonl").read_text().count("\n") if (cut / "metrics.jsonl").exists() else 0
        if lines >= 17:
            break
        time.sleep(0.005)
    process.kill()
    process.wait()
    assert not (cut / "status.json").exists(), "the run finished before it could be killed"
    assert [path.name for path in checkpoint_folders(cut)] == ["step-00000014", "step-00000007"]
    subprocess.run([*command, str(cut)], check=True, capture_output=True)

    whole = load_file(tmp_path / "whole" / "final" / "model.safetensors")
    resumed = load_file(cut / "final" / "model.safetensors")
    assert all(torch.equal(whole[name], resumed[name]) for name in whole)
    assert _strip_times(read_metrics(cut / "metrics.jsonl")) == _strip_times(
        read_metrics(tmp_path / "whole" / "metrics.jsonl")
    )
    assert json.loads((cut / "status.json").read_text())["status"] == "completed"
    assert not (cut / "checkpoints").exists()


@pytest.mark.parametrize("lag", [0, 2])
@pytest.mark.parametrize(
    "name",
    [
        "none",
        "k1-reward",
        "k1-loss",
        "k1-both",
        "k2-loss",
        "k3-reward",
        "k3-loss",
        "k3-both",
        "k1-loss-tokis",
        "k3-loss-tokis",
        "k1-reward-seqis",
        "k1-reward-prefixis",
    ],
)
def test_every_kl_configuration_trains_on_and_off_policy(tiny_base, arith_data, tmp_path, parity_reward, name, lag):
    beta = 0.0 if name == "none" else 0.1
    advantage = "group-mean" if lag else "rloo"
    config = tiny_config(
        tiny_base, arith_data, kl=name, beta=beta, async_lag=lag, advantage=advantage, ratio_clamp=8.0, steps=3
    )
    assert Trainer(config, tmp_path).run() == "completed"
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    in_loss = name != "none" and ("loss" in name or "both" in name or "is" in name.split("-")[-1])
    assert all(r["loss/kl"] != 0.0 for r in records[1:3]) == in_loss
    assert all(torch.isfinite(torch.tensor(r["loss/total"])) for r in records[:3])


def test_ppo_minibatches_run_several_updates_per_batch(tiny_base, arith_data, tmp_path, parity_reward, monkeypatch):
    config = tiny_config(
        tiny_base, arith_data, ppo_clip=0.2, ppo_epochs=2, minibatches=2, steps=1, kl="k3-loss", beta=0.1
    )
    trainer = Trainer(config, tmp_path)
    steps = []
    original = trainer.learner.optimizer.step
    monkeypatch.setattr(trainer.learner.optimizer, "step", lambda *a, **k: (steps.append(1), original(*a, **k))[1])
    trainer.run()
    assert len(steps) == 4


def test_metrics_reach_mlflow_when_tracking_is_on(tiny_base, arith_data, tmp_path, parity_reward, monkeypatch):
    from mlflow.tracking import MlflowClient

    from klrl.tracking.runs import Tracker

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = MlflowClient()
    run = client.create_run(client.create_experiment("test", artifact_location=(tmp_path / "artifacts").as_uri()))
    Trainer(
        tiny_config(tiny_base, arith_data, steps=2, kl="k1-reward", beta=0.1),
        tmp_path / "cell",
        Tracker(run.info.run_id),
    ).run()
    history = client.get_metric_history(run.info.run_id, "rollout/reward_mean")
    assert [m.step for m in history] == [0, 1]
    assert client.get_run(run.info.run_id).data.params["kl"] == "k1-reward"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"metrics.jsonl", "status.json", "config.yaml"}
    assert [m.step for m in client.get_metric_history(run.info.run_id, "periodic_eval/pass_at_1")] == [0, 2]


def test_the_sampler_is_synced_with_the_weights_it_samples_from(
    tiny_base, arith_data, tmp_path, parity_reward, monkeypatch
):
    """The contract a backend with its own weights (vllm) relies on: sync(model, version) hands over
    the weights of optimizer step `version`, the current policy's, for rollouts and evaluations alike."""
    synced = []
    monkeypatch.setattr(HFSampler, "sync", lambda self, model, version: synced.append((version, _weights(model))))
    trainer = Trainer(
        tiny_config(tiny_base, arith_data, async_lag=2, steps=4, kl="k3-loss", beta=0.1), tmp_path / "cell"
    )
    policy_at, train_step = {}, trainer.train_step

    def recording_step():
        policy_at[trainer.step] = _weights(trainer.policy)
        return train_step()

    trainer.train_step = recording_step
    trainer.run()
    policy_at[4] = _weights(trainer.policy)
    # evaluation of θ0, the rollouts of steps 0-2 sampled by θ0 at step 0 and step 3's by θ1 at
    # step 1 (lag 2), final evaluation of θ4: the sampler is only ever given the policy
    assert [version for version, _ in synced] == [0, 0, 0, 0, 1, 4]
    for version, weights in synced:
        assert all(torch.equal(weights[name], policy_at[version][name]) for name in weights)
    assert not all(torch.equal(policy_at[1][name], policy_at[0][name]) for name in policy_at[0])


@pytest.mark.parametrize(
    "settings",
    [
        {"kl": "k3-loss", "beta": 0.1},
        {"kl": "k1-reward", "beta": 0.1, "async_lag": 1, "loss_aggregation": "token-mean"},
        {"kl": "k1-reward-prefixis", "beta": 0.1, "async_lag": 1, "ppo_epochs": 2, "minibatches": 2, "ppo_clip": 0.2},
        {"kl": "k3-both", "beta": 0.1, "ppo_epochs": 2, "loss_aggregation": "token-mean"},
    ],
)
def test_micro_batches_take_the_whole_batch_step(tiny_base, arith_data, tmp_path, parity_reward, settings):
    """Gradient accumulation over micro-batches of 3 rows (the last one shorter) equals one pass,
    alone or within PPO epochs and minibatches (minibatches of 8 rows: chunks of 3, 3, 2).

    The first update's gradient (same weights, same rows) must agree to rounding. Later ones
    start from weights that differ by that rounding, which AdamW at lr 1e-2 compounds over up to
    12 updates (the chunks' prompt forwards see other batches of distinct prompts): the weights
    must stay within 1e-4 of the distance they moved, where a lost chunk or a wrong denominator
    is off by a fraction of it."""
    initial = _weights(AutoModelForCausalLM.from_pretrained(tiny_base))
    runs = {}
    for micro in (None, 3):
        trainer = Trainer(
            tiny_config(tiny_base, arith_data, steps=3, micro_batch_size=micro, **settings), tmp_path / str(micro)
        )
        gradients = []
        trainer.learner.optimizer.register_step_pre_hook(
            lambda *_: gradients.append([p.grad.clone() for p in trainer.policy.parameters()])
        )
        trainer.run()
        runs[micro] = (
            _strip_times(read_metrics(tmp_path / str(micro) / "metrics.jsonl")),
            _weights(trainer.policy),
            gradients[0],
        )
    (whole, whole_weights, whole_first), (chunked, chunked_weights, chunked_first) = runs[None], runs[3]
    first_gap = _norm([a - b for a, b in zip(whole_first, chunked_first)]) / _norm(whole_first)
    assert first_gap < 1e-6, first_gap
    for a, b in zip(whole, chunked, strict=True):
        assert a.keys() == b.keys()
        assert all(b[key] == pytest.approx(a[key], rel=1e-3, abs=1e-6) for key in a), a["step"]
    moved = _norm([whole_weights[name] - initial[name] for name in initial])
    gap = _norm([whole_weights[name] - chunked_weights[name] for name in initial])
    assert gap < 1e-4 * moved, (gap, moved)


def _norm(tensors) -> float:
    return sum(tensor.double().square().sum().item() for tensor in tensors) ** 0.5
