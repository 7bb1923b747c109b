"""Data-parallel training under torchrun (FSDP2 on CPU with gloo, two processes) against the
single process: the same metrics and final weights, on- and off-policy; bf16 mixed precision;
the decoding loop holding the weights all-gathered; the paper's three architectures, as
config/paper.yaml trains them, at 1, 2 and 4 processes."""

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
from klrl.training.checkpoint import checkpoint_folders
from klrl.training.distributed import local_share
from klrl.training.sampling import HFSampler
from klrl.training.trainer import Trainer
from torch.distributed.tensor import DTensor
from klrl.training.record import read_metrics
from safetensors.torch import load_file

from conftest import tiny_config, tiny_settings
from klrl.grid.expansion import expand_grid
from paper_models import PAPER_MODELS, write_paper_model
from workflow_helpers import load_config

PARITY_CLI = Path(__file__).parents[1] / "parity_klrl.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
TORCHRUN_4 = [*TORCHRUN[:-1], "4"]
COMPARED = (
    "loss/total",
    "loss/kl",
    "loss/policy",
    "kl/k1",
    "kl/k2",
    "kl/k3",
    "optim/grad_norm",
    "rollout/reward_mean",
    "periodic_eval/pass@1",
)


def _settings(tiny_base, arith_data, kl="none", beta=0.0, kl_options=None, **overrides) -> dict:
    return tiny_settings(
        tiny_base,
        arith_data,
        kl,
        beta,
        kl_options,
        **({"reward": "parity", "steps": 3, "lr": 1e-3, "eval_samples": 2, "threads": 1} | overrides),
    )


def _train(folder: Path, settings: dict, launcher: list[str], cli: list[str]) -> float:
    """Run `klrl train` on a config written into `folder`; returns the wall time in seconds."""
    return _train_cells({folder: settings}, launcher, cli)


def _train_cells(cells: dict[Path, dict], launcher: list[str], cli: list[str]) -> float:
    """`klrl train` on each cell's config (written into its folder), the cells one after the
    other in one launch (parity_klrl.py's `+`); returns the wall time in seconds."""
    commands = []
    for folder, settings in cells.items():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cell.yaml").write_text(yaml.safe_dump(settings))
        commands += [
            *(["+"] if commands else []),
            "train",
            "--config",
            str(folder / "cell.yaml"),
            "--out",
            str(folder / "train"),
        ]
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    result = subprocess.run(
        [*launcher, *cli, *commands], capture_output=True, text=True, env=env, timeout=300, check=False
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
                assert _close(one[key], two[key], rel, atol), (pair, one["step"], key, one[key], two[key])


def _assert_same_weights(single: Path, pair: Path, atol: float) -> None:
    ours, theirs = load_file(single / "final" / "model.safetensors"), load_file(pair / "final" / "model.safetensors")
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert theirs[name].dtype == torch.float32
        assert torch.allclose(ours[name], theirs[name], atol=atol, rtol=0), (
            name,
            (ours[name] - theirs[name]).abs().max(),
        )


def _assert_same_update(base: Path, single: Path, many: Path, rel: float) -> None:
    """The update of `many` (final weights − the base's) within `rel` of `single`'s in L2 norm;
    its saved weights float32, and its tensors the base's (tied output embeddings saved once)."""
    before, ours, theirs = (
        load_file(folder / "model.safetensors") for folder in (base, single / "final", many / "final")
    )
    assert before.keys() == ours.keys() == theirs.keys() and {tensor.dtype for tensor in theirs.values()} == {
        torch.float32
    }
    update = sum(((ours[name] - before[name]) ** 2).sum() for name in before).sqrt()
    apart = sum(((ours[name] - theirs[name]) ** 2).sum() for name in before).sqrt()
    assert update > 0 and apart <= rel * update, (many, apart.item(), update.item())


def _assert_a_plain_model_folder(train: Path, architecture: str = "LlamaForCausalLM") -> None:
    config = json.loads((train / "final" / "config.json").read_text())
    assert config["architectures"] == [architecture]
    assert json.loads((train / "status.json").read_text())["status"] == "completed"
    assert not (train / "checkpoints").exists()


def test_local_share_split_whole_groups_in_rank_order():
    rows = [local_share(24, 3, rank, 4) for rank in range(4)]
    assert rows == [slice(0, 6), slice(6, 12), slice(12, 18), slice(18, 24)]
    assert local_share(24, 3, 0, 1) == slice(0, 24)
    with pytest.raises(ValueError, match="cannot be split evenly"):
        local_share(24, 3, 0, 3)  # 8 groups for 3 processes
    with pytest.raises(ValueError, match="cannot be split evenly"):
        local_share(10, 4, 0, 1)  # not whole groups


def test_the_trainers_decoding_loop_gathers_the_weights_once_and_shards_them_again(tiny_base, arith_data, tmp_path):
    """Under FSDP (a one-process group, bf16), a layer reshards after each forward, so decoding
    would all-gather it once per token; the trainer's rollout holds it whole through the loop
    (`hold_weights=gathered`), gives the same rollout as without the hold, and leaves every
    weight a shard again."""
    try:
        trainer = Trainer(tiny_config(tiny_base, arith_data, mixed_precision="bf16"), tmp_path)
        layer = trainer.policy.model.layers[0]
        whole_after_forward = []
        layer.register_forward_hook(
            lambda *_: whole_after_forward.append(not isinstance(layer.self_attn.q_proj.weight, DTensor))
        )
        rollouts = {}
        for name in ("gathered", "per forward"):
            if name == "per forward":
                trainer.actor.sampler = dataclasses.replace(trainer.actor.sampler, hold_weights=HFSampler.hold_weights)
            whole_after_forward.clear()
            rollouts[name] = trainer.actor.sample(0, version=0).rollout
            assert (
                len(whole_after_forward) == rollouts[name].completion_ids.shape[1]
            )  # prefill + one forward per later token
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
        tiny_base,
        arith_data,
        kl="k1-loss",
        beta=0.1,
        async_lag=2,
        steps=4,
        advantage="group-mean",
        ratio_clamp=8.0,
        kl_options={"value_clamp": 10.0},
        checkpoint_every=2,
        loss_aggregation="token-mean",
    )
    single, pair = _single_and_pair(tmp_path, settings, {"micro_batch_size": 3})  # and gradient accumulation
    _assert_same_metrics(single, pair, rel=1e-4, keys=(*COMPARED, "is/ratio_mean", "is/ratio_max"))
    assert any(r.get("is/ratio_max", 1.0) != 1.0 for r in read_metrics(pair / "metrics.jsonl"))  # μ ≠ πθ
    _assert_same_weights(single, pair, atol=1e-5)
    _assert_a_plain_model_folder(pair)


def _paper_cells(name: str, base: Path, data: Path) -> dict[str, dict]:
    """The settings of an on- and an off-policy cell of the paper model `name`, as config/paper.yaml
    makes them (its `train` section and groups: bf16 over float32 master weights, activation
    checkpointing, micro-batches of 2; off-policy the Dr. GRPO advantage, IS cap 8, KL clamp 10),
    with the model declared by `hub:` as the local folder `base` (the path of a Hub model), and
    only scale changed: 3 steps of 4 prompts × 4 samples at lag 2, a larger learning rate (so that
    the updates stand out of bfloat16's rounding), the task's data and reward those of `data`
    with the parity reward (an untrained model earns no other), HF rollouts on CPU processes."""
    paper = load_config("paper")
    group = {group["name"]: group for group in paper["groups"]}
    config = paper | {
        "models": {name: {"hub": str(base)}},
        "jobs": {"gpus": 0, "threads": 4, "processes": 4},
        "train": paper["train"] | {"generation_backend": "hf", "max_new_tokens": 6, "eval_size": 2, "eval_samples": 1},
        "train_overrides": {
            "steps": 3,
            "prompts_per_step": 4,
            "group_size": 2,
            "async_lag": 2,
            "checkpoint_every": 2,
            "lr": 1e-3,
        },
        "groups": [
            group["on-policy"] | {"models": [name], "kl": ["k3-loss"], "beta": [0.1]},
            group["off-policy-math"] | {"models": [name], "kl": ["k1-loss"]},
        ],
    }
    cells = {cell.policy: cell.train for cell in expand_grid(config).values()}
    data_files = {"train_data": str(data / "train.jsonl"), "eval_data": str(data / "test.jsonl"), "reward": "parity"}
    return {policy: settings | data_files for policy, settings in cells.items()}


@pytest.mark.slow  # torchrun: 2 and 4 processes; three launches, each training the six cells in turn
def test_the_papers_architectures_train_alike_in_one_two_and_four_processes(arith_data, tmp_path):
    """Each paper architecture (tests/paper_models.py), declared as config/paper.yaml declares it
    and trained with its settings (`_paper_cells`), on- and off-policy, in 1, 2 and 4 processes.

    Tolerance: every per-step metric within 1e-2 relatively (1e-6 absolutely near 0), and the
    update of the weights (final − base) of 2 and 4 processes within 1% of the single process's
    in L2 norm. Each row is computed alike whatever the world size (the same micro-batches of
    2 rows, in bfloat16), so the first update is the same to float32 rounding of the gradient's
    sum (the order of the reduction differs: ~1e-7). AdamW's first steps are normalised, though:
    a weight whose gradient is at that rounding level moves by ±lr whichever way it rounds, and
    the next steps start from weights a few such moves apart. Measured on CPU: metrics within
    3e-3 (below one bfloat16 rounding, 2^-8 ≈ 4e-3), updates within 0.3%; most cells agree to
    1e-6."""
    bases = {name: write_paper_model(name, tmp_path / name / "base") for name in PAPER_MODELS}
    cells = {
        (name, policy): settings
        for name, base in bases.items()
        for policy, settings in _paper_cells(name, base, arith_data).items()
    }
    seconds = {}
    for processes, launcher in ((1, [sys.executable]), (2, TORCHRUN), (4, TORCHRUN_4)):
        folders = {tmp_path / name / f"{policy}-{processes}": settings for (name, policy), settings in cells.items()}
        seconds[processes] = _train_cells(folders, launcher, [str(PARITY_CLI)])
    print(f"wall times by processes: {seconds}")
    for (name, policy), settings in cells.items():
        assert (
            settings["base_model"] == str(bases[name])
            and settings["mixed_precision"] == "bf16"
            and settings["activation_checkpointing"]
        )
        single = tmp_path / name / f"{policy}-1" / "train"
        for processes in (2, 4):
            many = tmp_path / name / f"{policy}-{processes}" / "train"
            _assert_same_metrics(single, many, rel=1e-2, keys=(*COMPARED, "is/ratio_max"))
            _assert_same_update(bases[name], single, many, rel=1e-2)
            _assert_a_plain_model_folder(many, PAPER_MODELS[name].architecture)
        metrics = read_metrics(tmp_path / name / f"{policy}-4" / "train" / "metrics.jsonl")
        assert any(r.get("loss/kl", 0) != 0 for r in metrics) and any(
            r.get("rollout/advantage_abs_mean", 0) > 0 for r in metrics
        )
        assert any(r.get("is/ratio_max", 1.0) != 1.0 for r in metrics) == (policy == "off")  # μ ≠ πθ off-policy only


RESUMES = {
    "2 processes, crash, 2 resume": (TORCHRUN, TORCHRUN),
    "2 write, 1 resumes": (TORCHRUN, []),
    "1 writes, 2 resume": ([], TORCHRUN),
}


def _resumed_settings(tiny_base, arith_data) -> dict:
    return _settings(tiny_base, arith_data, kl="k3-loss", beta=0.1, async_lag=2, steps=4, checkpoint_every=2)


@pytest.fixture(scope="module")
def uninterrupted(tiny_base, arith_data, tmp_path_factory) -> Path:
    """The train folder of the resumed cell run by one process without a crash, for every resume."""
    single = tmp_path_factory.mktemp("uninterrupted")
    _train(single, _resumed_settings(tiny_base, arith_data), [sys.executable], [str(PARITY_CLI)])
    return single / "train"


@pytest.mark.slow  # torchrun: two processes
@pytest.mark.parametrize("writers, readers", RESUMES.values(), ids=RESUMES.keys())
def test_a_crashed_run_resumes_under_any_process_count_like_an_uninterrupted_run(
    tiny_base, arith_data, uninterrupted, tmp_path, writers, readers
):
    """The process writing the step-2 checkpoint is killed right after it (each process's shards
    of the weights and the AdamW moments, and the queued rollouts of steps 2 and 3, sampled by θ0
    and θ1 at lag 2); the same cell resumed by 2 processes, or by another count than wrote it
    (DCP reshards on load, and each process takes its own rows of the queue), ends where one
    process running uninterrupted ends. Two processes write and read DTensor shards, one process
    plain tensors."""
    settings = _resumed_settings(tiny_base, arith_data)
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "cell.yaml").write_text(yaml.safe_dump(settings))
    command = [
        *(writers or [sys.executable]),
        str(PARITY_CLI),
        "train",
        "--config",
        str(cut / "cell.yaml"),
        "--out",
        str(cut / "train"),
    ]
    env = os.environ | {"OMP_NUM_THREADS": "1", "KLRL_TEST_CRASH_AT": "2"}
    crashed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert crashed.returncode != 0
    assert [path.name for path in checkpoint_folders(cut / "train")] == ["step-00000002"] and not (
        cut / "train" / "status.json"
    ).exists()
    shard_files = sorted(path.name for path in (cut / "train" / "checkpoints" / "step-00000002").glob("*.distcp"))
    assert shard_files == (
        ["__0_0.distcp", "__1_0.distcp"] if writers else ["__0_0.distcp"]
    )  # one file per writing process
    before = [record for record in read_metrics(cut / "train" / "metrics.jsonl") if record["step"] < 2]
    _train(cut, settings, readers or [sys.executable], [str(PARITY_CLI)])
    assert [
        record for record in read_metrics(cut / "train" / "metrics.jsonl") if record["step"] < 2
    ] == before  # resumed, not redone: the same timings
    _assert_same_metrics(uninterrupted, cut / "train", rel=1e-4)
    _assert_same_weights(uninterrupted, cut / "train", atol=1e-5)


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
    assert not all(
        torch.equal(weights[name], load_file(fp32 / "train" / "final" / "model.safetensors")[name]) for name in weights
    )


@pytest.mark.slow  # torchrun: two processes
def test_a_batch_the_processes_cannot_share_is_an_error(tiny_base, arith_data, tmp_path):
    (tmp_path / "cell.yaml").write_text(
        yaml.safe_dump(_settings(tiny_base, arith_data, reward="arithmetic", prompts_per_step=3))
    )
    command = [
        *TORCHRUN,
        "-m",
        "klrl",
        "train",
        "--config",
        str(tmp_path / "cell.yaml"),
        "--out",
        str(tmp_path / "train"),
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, env=os.environ | {"OMP_NUM_THREADS": "1"}, timeout=300, check=False
    )
    assert result.returncode != 0
    assert "prompts_per_step=3 must be a multiple of the 2 processes" in result.stdout + result.stderr, result.stderr[
        -3000:
    ]
