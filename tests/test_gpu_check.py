"""benchmarks/gpu_check.py's parts that need no GPU: which stages run, the verdicts it draws
from a run's metrics, and its training stages for real on CPUs (two processes under torchrun,
the kill-and-resume stage included)."""

import math
import os
import subprocess
import sys

import pytest
import torch

from workflow_helpers import load_benchmark

gpu_check = load_benchmark("gpu_check")


def _records(losses, ratio_max=1.0):
    return [
        {
            "step": step,
            "loss/total": loss,
            "kl/k1": 0.1,
            "rollout/reward_mean": 0.5,
            "rollout/response_length": 7.0,
            "is/ratio_max": ratio_max,
            "time/generate": 1.0 + step,
        }
        for step, loss in enumerate(losses)
    ]


def test_every_stage_runs_by_default_and_a_stage_brings_the_run_it_reads():
    assert gpu_check.parse_args([]).stages == list(gpu_check.STAGES)
    assert gpu_check.parse_args(["--stages", "checkpoint-resume"]).stages == ["vllm-rollouts", "checkpoint-resume"]
    assert gpu_check.parse_args(["--stages", "lm-eval-vllm,preflight"]).stages == [
        "preflight",
        "vllm-rollouts",
        "lm-eval-vllm",
    ]
    assert "lm-eval-vllm" not in gpu_check.parse_args(["--rollouts", "hf"]).stages


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stages", "fsdp"], "unknown stage 'fsdp'"),
        (["--rollouts", "hf", "--stages", "lm-eval-vllm"], "lm-eval-vllm needs --rollouts vllm"),
        (["--steps", "3"], "--steps 3: the resume stage needs more than 3"),
    ],
)
def test_bad_arguments_are_one_line_errors(argv, message, capsys):
    with pytest.raises(SystemExit):
        gpu_check.parse_args(argv)
    assert message in capsys.readouterr().err


def test_a_resumed_run_passes_when_it_kept_its_early_steps_and_matches_the_uninterrupted_one():
    straight = _records([1.0, 0.9, 0.8, 0.7])
    kept = straight[:2]
    resumed = kept + _records([0, 0, 0.8, 0.7 * (1 + 0.5 * gpu_check.RESUME_TOLERANCE)])[2:]
    ok, detail = gpu_check.same_run(resumed, straight, kept)
    assert ok and "resumed at step 2" in detail

    started_over = [dict(record, **{"time/generate": 9.0}) for record in resumed[:2]] + resumed[2:]
    ok, detail = gpu_check.same_run(started_over, straight, kept)
    assert not ok and "started over instead of resuming" in detail

    drifted = kept + _records([0, 0, 0.8, 0.7 * (1 + 2 * gpu_check.RESUME_TOLERANCE)])[2:]
    ok, detail = gpu_check.same_run(drifted, straight, kept)
    assert not ok and "largest relative gap to the uninterrupted run 0.02" in detail

    ok, detail = gpu_check.same_run(resumed[:3], straight, kept)
    assert not ok and "steps [0, 1, 2], the uninterrupted run's [0, 1, 2, 3]" in detail


def test_off_policy_means_a_ratio_away_from_one():
    assert gpu_check.off_policy(_records([1.0, 0.9], ratio_max=1.0)) == (
        False,
        "largest |max ratio − 1| over the steps: 0",
    )
    assert gpu_check.off_policy(_records([1.0, 0.9], ratio_max=1.25)) == (
        True,
        "largest |max ratio − 1| over the steps: 0.25",
    )


def test_speed_leaves_out_the_first_step():
    records = _records([1.0, 0.9, 0.8])  # steps of 1, 2 and 3 seconds, 7 tokens per row
    result = gpu_check.speed(records, rows=4)
    assert result["step_seconds"] == 2.0 and result["phase_seconds"]["generate"] == 2.0  # the lower middle step
    assert result["generated_tokens_per_second"] == pytest.approx(2 * 4 * 7 / 5)
    assert math.isnan(result["peak_gpu_memory_gib"])  # no CUDA: no memory figure


def test_the_phases_printed_are_the_median_steps_and_add_up_to_its_time():
    phases = [(0.5, 0.1), (0.1, 0.9), (0.2, 0.3), (0.6, 0.6)]  # (generate, backward): totals 0.6, 1.0, 0.5, 1.2
    records = [{"time/generate": g, "time/backward": b, "rollout/response_length": 1.0} for g, b in phases]
    result = gpu_check.speed(records, rows=1)  # the steps after the first: 1.0, 0.5, 1.2 → the median step is 1.0
    assert result["step_seconds"] == 1.0
    assert result["phase_seconds"] == {"generate": 0.1, "score": 0.0, "backward": 0.9, "optimizer": 0.0}


@pytest.mark.slow  # torchrun: two processes, three runs
def test_the_gpu_check_fails_cleanly_without_cuda_and_resumes_a_killed_run_on_cpus(tiny_base, tmp_path, repo_root):
    """The GPU check's training stages on CPUs (the tiny model, the learner's rollouts): its
    lagged run, then the same run killed after its step-2 checkpoint and resumed."""
    script = repo_root / "benchmarks" / "gpu_check.sh"
    env = os.environ | {"PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    if not torch.cuda.is_available():
        result = subprocess.run([str(script)], capture_output=True, text=True, env=env, check=False)
        assert result.returncode == 2 and "no CUDA device visible to torch" in result.stderr
    args = [
        "--device",
        "cpu",
        "--rollouts",
        "hf",
        "--base",
        str(tiny_base),
        "--stages",
        "checkpoint-resume",
        "--gpus",
        "2",
    ]
    # 8 steps: the run is killed once step 2 is logged, and the 5 steps after it leave the poller
    # time to see it (at 4, a run of 0.13 s a step on an Intel Xeon ended before it was killed)
    sizes = ["--steps", "8", "--prompts", "4", "--group-size", "2", "--max-new-tokens", "4", "--threads", "1"]
    result = subprocess.run(
        [str(script), *args, *sizes, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    verdicts = [
        line.split()[1:3]
        for line in result.stdout.splitlines()
        if line.startswith("gpu_check: ") and line.split()[2] in ("PASS", "FAIL")
    ]
    assert verdicts == [["vllm-rollouts", "PASS"], ["checkpoint-resume", "PASS"]], result.stdout
    assert "resumed at step 2; largest relative gap to the uninterrupted run 0 " in result.stdout  # CPUs: bitwise
    assert "step time (median)" in result.stdout and "generated tokens / s" in result.stdout
    shares = [
        int(line.rsplit("(", 1)[1].rstrip("%)"))
        for line in result.stdout.splitlines()
        if line.strip().split(" ")[0] in ("generate", "score", "backward", "optimizer")
    ]
    assert len(shares) == 4 and 90 <= sum(shares) <= 102, result.stdout  # the phases make up the step


def test_the_lease_stage_sees_two_devices_on_a_pool_of_two_and_skips_on_one(monkeypatch):
    """On CPUs with a faked pool: the two jobs' CUDA_VISIBLE_DEVICES differ (on CUDA their GPUs'
    UUIDs are compared too)."""
    from gpu_lease_check import lease_check

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    passed, detail = lease_check("cpu")
    assert passed is True and sorted(detail.split(" against ")) == ["visible 0", "visible 1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert lease_check("cpu") == (None, "needs 2 or more GPUs; the pool has 1")
