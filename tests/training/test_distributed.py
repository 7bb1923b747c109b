"""Data-parallel training under torchrun (FSDP2 on CPU with gloo, two processes) against the
single process: the same metrics and final weights, on- and off-policy; bf16 mixed precision;
the decoding loop holding the weights all-gathered."""

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from klrl.training import distributed
from klrl.training.distributed import local_rows
from klrl.training.sampling import HFSampler
from klrl.training.trainer import Trainer
from torch.distributed.tensor import DTensor
from klrl.training.record import read_metrics
from safetensors.torch import load_file

from conftest import tiny_config, tiny_settings

PARITY_CLI = Path(__file__).parents[1] / "parity_klrl.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
COMPARED = ("loss/total", "loss/kl", "loss/policy", "kl/k1", "kl/k2", "kl/k3", "optim/grad_norm", "rollout/reward_mean", "periodic_eval/pass@1")


def _settings(tiny_base, arith_data, kl="none", beta=0.0, kl_options=None, **overrides) -> dict:
    return tiny_settings(tiny_base, arith_data, kl, beta, kl_options, **({"reward": "parity", "steps": 3, "lr": 1e-3, "eval_samples": 2, "threads": 1} | overrides))


def _train(folder: Path, settings: dict, launcher: list[str], cli: list[str]) -> float:
    """Run `klrl train` on a config written into `folder`; returns the wall time in seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cell.yaml").write_text(yaml.safe_dump(settings))
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    result = subprocess.run(
        [*launcher, *cli, "train", "--config", str(folder / "cell.yaml"), "--out", str(folder / "train")],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return time.monotonic() - start


def _single_and_pair(tmp_path, settings, pair_settings=None) -> tuple[Path, Path]:
    single, pair = tmp_path / "single", tmp_path / "pair"
    seconds = {
        "single": _train(single, settings, [sys.executable], [str(PARITY_CLI)]),
        "torchrun": _train(pair, settings | (pair_settings or {}), TORCHRUN, [str(PARITY_CLI)]),
    }
    print(f"wall times: {seconds}")
    return single / "train", pair / "train"


def _close(a: float, b: float, rel: float, atol: float = 1e-6) -> bool:
    """Within `rel` relatively, or `atol` absolutely (a KL near 0 is a difference of log-probs of
    order 1: float32 rounding of those is ~1e-7)."""
    return abs(a - b) <= rel * max(abs(a), abs(b)) + atol


def _assert_same_metrics(single: Path, pair: Path, rel: float, keys=COMPARED, atol: float = 1e-6) -> None:
    ours, theirs = read_metrics(single / "metrics.jsonl"), read_metrics(pair / "metrics.jsonl")
    assert [r["step"] for r in ours] == [r["step"] for r in theirs]
    for one, two in zip(ours, theirs):
        for key in keys:
            if key in one:
                assert _close(one[key], two[key], rel, atol), (one["step"], key, one[key], two[key])


def _assert_same_weights(single: Path, pair: Path, atol: float) -> None:
    ours, theirs = load_file(single / "final" / "model.safetensors"), load_file(pair / "final" / "model.safetensors")
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert theirs[name].dtype == torch.float32
        assert torch.allclose(ours[name], theirs[name], atol=atol, rtol=0), (name, (ours[name] - theirs[name]).abs().max())


def _assert_a_plain_model_folder(train: Path) -> None:
    config = json.loads((train / "final" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert json.loads((train / "status.json").read_text())["status"] == "completed"
    assert not (train / "checkpoint.pt").exists()


def test_local_rows_split_whole_groups_in_rank_order():
    rows = [local_rows(24, 3, rank, 4) for rank in range(4)]
    assert rows == [slice(0, 6), slice(6, 12), slice(12, 18), slice(18, 24)]
    assert local_rows(24, 3, 0, 1) == slice(0, 24)
    with pytest.raises(ValueError, match="cannot be split evenly"):
        local_rows(24, 3, 0, 3)  # 8 groups for 3 processes
    with pytest.raises(ValueError, match="cannot be split evenly"):
        local_rows(10, 4, 0, 1)  # not whole groups


def test_the_trainers_decoding_loop_gathers_the_weights_once_and_shards_them_again(tiny_base, arith_data, tmp_path):
    """Under FSDP (a one-process group, bf16), a layer reshards after each forward, so decoding
    would all-gather it once per token; the trainer's rollout holds it whole through the loop
    (`hold_weights=gathered`), gives the same rollout as without the hold, and leaves every
    weight a shard again."""
    try:
        trainer = Trainer(tiny_config(tiny_base, arith_data, mixed_precision="bf16"), tmp_path)
        layer = trainer.policy.model.layers[0]
        whole_after_forward = []
        layer.register_forward_hook(lambda *_: whole_after_forward.append(not isinstance(layer.self_attn.q_proj.weight, DTensor)))
        rows = trainer.schedule.batch(0)
        rollouts = {}
        for name in ("gathered", "per forward"):
            if name == "per forward":
                trainer.sampler = dataclasses.replace(trainer.sampler, hold_weights=HFSampler.hold_weights)
            whole_after_forward.clear()
            rollouts[name], _ = trainer.rollout(rows)
            assert len(whole_after_forward) == rollouts[name].completion_ids.shape[1]  # prefill + one forward per later token
            assert all(whole_after_forward) == (name == "gathered") and any(whole_after_forward) == (name == "gathered")
            assert all(isinstance(weight, DTensor) for weight in trainer.policy.model.layers.parameters())
        assert torch.equal(rollouts["gathered"].completion_ids, rollouts["per forward"].completion_ids)
    finally:
        distributed.teardown()


@pytest.mark.slow  # torchrun: two processes
def test_two_processes_train_like_one_on_policy(tiny_base, arith_data, tmp_path):
    """Activation checkpointing and the offloaded reference change where things are computed
    and kept, not what: the two processes use both, the single one neither."""
    settings = _settings(tiny_base, arith_data, kl="k3-loss", beta=0.5)
    single, pair = _single_and_pair(tmp_path, settings, {"activation_checkpointing": True, "reference_offload": True})
    _assert_same_metrics(single, pair, rel=1e-4)
    assert any(r.get("loss/kl", 0) > 0 for r in read_metrics(pair / "metrics.jsonl"))
    assert any(r.get("rollout/advantage_abs_mean", 0) > 0 for r in read_metrics(pair / "metrics.jsonl"))
    _assert_same_weights(single, pair, atol=1e-5)
    _assert_a_plain_model_folder(pair)
    assert yaml.safe_load((pair / "config.yaml").read_text())["activation_checkpointing"] is True


@pytest.mark.slow  # torchrun: two processes
def test_two_processes_train_like_one_off_policy(tiny_base, arith_data, tmp_path):
    settings = _settings(
        tiny_base, arith_data, kl="k1-loss", beta=0.1, async_lag=2, steps=4, advantage="group-mean",
        ratio_clamp=8.0, kl_options={"value_clamp": 10.0}, checkpoint_every=2, loss_aggregation="token-mean",
    )
    single, pair = _single_and_pair(tmp_path, settings, {"micro_batch_size": 3})  # and gradient accumulation
    _assert_same_metrics(single, pair, rel=1e-4, keys=(*COMPARED, "is/ratio_mean", "is/ratio_max"))
    assert any(r.get("is/ratio_max", 1.0) != 1.0 for r in read_metrics(pair / "metrics.jsonl"))  # μ ≠ πθ
    _assert_same_weights(single, pair, atol=1e-5)
    _assert_a_plain_model_folder(pair)


@pytest.mark.slow  # torchrun: two processes
def test_two_processes_resume_after_a_crash_like_an_uninterrupted_run(tiny_base, arith_data, tmp_path):
    """Rank 0 dies right after the step-2 checkpoint (full weights, optimizer, the lag queue);
    torchrun stops the other process; the same command resumes and ends where one process
    running uninterrupted ends."""
    settings = _settings(tiny_base, arith_data, kl="k3-loss", beta=0.1, async_lag=1, steps=4, checkpoint_every=2)
    single = tmp_path / "single"
    _train(single, settings, [sys.executable], [str(PARITY_CLI)])
    cut = tmp_path / "cut"
    (cut).mkdir()
    (cut / "cell.yaml").write_text(yaml.safe_dump(settings))
    command = [*TORCHRUN, str(PARITY_CLI), "train", "--config", str(cut / "cell.yaml"), "--out", str(cut / "train")]
    env = os.environ | {"OMP_NUM_THREADS": "1", "KLRL_TEST_CRASH_AT": "2"}
    crashed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert crashed.returncode != 0
    assert (cut / "train" / "checkpoint.pt").exists() and not (cut / "train" / "status.json").exists()
    _train(cut, settings, TORCHRUN, [str(PARITY_CLI)])
    _assert_same_metrics(single / "train", cut / "train", rel=1e-4)
    _assert_same_weights(single / "train", cut / "train", atol=1e-5)


@pytest.mark.slow  # torchrun: two processes
def test_bf16_keeps_float32_master_weights(tiny_base, arith_data, tmp_path):
    """Mixed precision through the real CLI: two steps in bf16 stay near fp32's losses, and the
    trained parameters (the optimizer's, and the saved model) are float32."""
    settings = _settings(tiny_base, arith_data, reward="arithmetic", kl="k1-loss", beta=0.5, steps=2)
    fp32 = tmp_path / "fp32"
    _train(fp32, settings, TORCHRUN, ["-m", "klrl"])
    bf16 = tmp_path / "bf16"
    _train(bf16, settings | {"mixed_precision": "bf16"}, TORCHRUN, ["-m", "klrl"])
    # the exact KL, the entropy and the gradient norm within 2%; the sampled k1 (a sum of
    # log-prob differences near 0, here ~0.01) within 2e-3
    exact = ("exact/reverse_kl_seq", "exact/entropy_token", "optim/grad_norm")
    _assert_same_metrics(fp32 / "train", bf16 / "train", rel=2e-2, keys=exact)
    _assert_same_metrics(fp32 / "train", bf16 / "train", rel=0.0, keys=("loss/total", "loss/kl", "kl/k1"), atol=2e-3)
    assert read_metrics(bf16 / "train" / "metrics.jsonl")[1]["loss/kl"] > 0  # step 1: πθ has left πref
    weights = load_file(bf16 / "train" / "final" / "model.safetensors")
    assert {tensor.dtype for tensor in weights.values()} == {torch.float32}
    assert not all(torch.equal(weights[name], load_file(fp32 / "train" / "final" / "model.safetensors")[name]) for name in weights)


@pytest.mark.slow  # torchrun: two processes, three runs
def test_the_gpu_check_fails_cleanly_without_cuda_and_resumes_a_killed_run_on_cpus(tiny_base, tmp_path, repo_root):
    """The GPU check's training stages on CPUs (the tiny model, the learner's rollouts): its
    lagged run, then the same run killed after its step-2 checkpoint and resumed."""
    script = repo_root / "benchmarks" / "gpu_check.sh"
    env = os.environ | {"PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    if not torch.cuda.is_available():
        result = subprocess.run([str(script)], capture_output=True, text=True, env=env, check=False)
        assert result.returncode == 2 and "no CUDA device visible to torch" in result.stderr
    args = ["--device", "cpu", "--rollouts", "hf", "--base", str(tiny_base), "--stages", "checkpoint-resume", "--gpus", "2"]
    sizes = ["--steps", "4", "--prompts", "4", "--group-size", "2", "--max-new-tokens", "4", "--threads", "1"]
    result = subprocess.run(
        [str(script), *args, *sizes, "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    verdicts = [line.split()[1:3] for line in result.stdout.splitlines() if line.startswith("gpu_check: ") and line.split()[2] in ("PASS", "FAIL")]
    assert verdicts == [["vllm-rollouts", "PASS"], ["checkpoint-resume", "PASS"]], result.stdout
    assert "resumed at step 2; largest relative gap to the uninterrupted run 0 " in result.stdout  # CPUs: bitwise
    assert "step time (median)" in result.stdout and "generated tokens / s" in result.stdout
    shares = [int(line.rsplit("(", 1)[1].rstrip("%)")) for line in result.stdout.splitlines() if line.strip().split(" ")[0] in ("generate", "score", "backward", "optimizer")]
    assert len(shares) == 4 and 90 <= sum(shares) <= 102, result.stdout  # the phases make up the step


@pytest.mark.slow  # torchrun: two processes
def test_a_batch_the_processes_cannot_share_is_an_error(tiny_base, arith_data, tmp_path):
    (tmp_path / "cell.yaml").write_text(yaml.safe_dump(_settings(tiny_base, arith_data, reward="arithmetic", prompts_per_step=3)))
    command = [*TORCHRUN, "-m", "klrl", "train", "--config", str(tmp_path / "cell.yaml"), "--out", str(tmp_path / "train")]
    result = subprocess.run(command, capture_output=True, text=True, env=os.environ | {"OMP_NUM_THREADS": "1"}, timeout=300, check=False)
    assert result.returncode != 0
    assert "prompts_per_step=3 must be a multiple of the 2 processes" in result.stdout + result.stderr, result.stderr[-3000:]
