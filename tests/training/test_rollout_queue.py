"""The off-policy lag as a queue of rollouts (klrl.training.rollout_queue): the queue's place in
a checkpoint, read back whole by as many processes as wrote it or by another count; a run
killed right after a checkpoint with the queue empty, full or in between resumes to exactly
the uninterrupted run; a checkpoint of the stale-weights layout is refused, nothing overwritten."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from klrl.cli import main as klrl
from klrl.training import trainer as trainer_module
from klrl.training.checkpoint import PLAIN, checkpoint_folders
from klrl.training.record import read_metrics
from klrl.training.rollout_queue import Batch, queue_layout, queue_state, restore_queue
from klrl.training.sampling import Rollout

from conftest import tiny_settings

PAD = 7
PARITY_CLI = Path(__file__).resolve().parents[1] / "parity_klrl.py"


class Group:
    """Processes simulated by threads: `gather_rows` meets every rank's tensor at a barrier."""

    def __init__(self, world: int) -> None:
        self.world, self.slots, self.barrier = world, [None] * world, threading.Barrier(world)

    def rank(self, rank: int):
        group = self

        class Rank:
            device = torch.device("cpu")

            def gather_rows(self, tensor):
                group.slots[rank] = tensor
                group.barrier.wait()
                gathered = torch.cat(group.slots)
                group.barrier.wait()
                return gathered

        return Rank()


def _queued(step: int, rows: int, prompt: int, completion: int, seed: int, engine: bool) -> Batch:
    generator = torch.Generator().manual_seed(seed)
    ids = lambda width: torch.randint(8, 50, (rows, width), generator=generator)  # noqa: E731
    logp = lambda: -torch.rand(rows, completion, generator=generator)  # noqa: E731
    rollout = Rollout(
        ids(prompt),
        torch.ones(rows, prompt, dtype=torch.long),
        ids(completion),
        torch.ones(rows, completion, dtype=torch.long),
        logp() if engine else None,
    )
    return Batch(step, step - 2, rollout, logp(), torch.rand(rows, generator=generator))


def _save(per_rank: list[list[Batch]]) -> tuple[dict, list]:
    """What rank 0 saves of the queues of len(per_rank) processes (each gathers the others' rows)."""
    group, saved = Group(len(per_rank)), {}

    def run(rank):
        saved[rank] = queue_state(per_rank[rank], group.rank(rank), PAD)

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(len(per_rank))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index in saved[0][0]:  # every process saves the same tensors: DCP keeps one copy
        assert all(torch.equal(saved[0][0][index]["rewards"], saved[rank][0][index]["rewards"]) for rank in saved)
    return saved[0]


def _equal(first: Batch, second: Batch) -> bool:
    fields, others = first.fields(), second.fields()
    return (first.step, first.version, sorted(fields)) == (second.step, second.version, sorted(others)) and all(
        torch.equal(fields[name], others[name]) for name in fields
    )


@pytest.mark.parametrize("engine", [False, True], ids=["hf rollouts", "with the engine's log-probs"])
def test_two_processes_queues_of_other_widths_are_read_back_by_two_as_they_were_and_by_one(engine):
    queues = [
        [_queued(3, 4, prompt=3, completion=6, seed=0, engine=engine), _queued(4, 4, 5, 2, 1, engine)],
        [_queued(3, 4, prompt=5, completion=4, seed=2, engine=engine), _queued(4, 4, 2, 3, 3, engine)],
    ]
    tensors, plain = _save(queues)
    assert [entry["widths"] for entry in plain] == [[[3, 6], [5, 4]], [[5, 2], [2, 3]]]
    layout = queue_layout(plain)
    assert {index: {name: (t.shape, t.dtype) for name, t in fields.items()} for index, fields in layout.items()} == {
        index: {name: (t.shape, t.dtype) for name, t in fields.items()} for index, fields in tensors.items()
    }
    for rank, rows in enumerate((slice(0, 4), slice(4, 8))):  # as many readers: each its own rows, as they were
        restored = restore_queue(tensors, plain, rows)
        assert len(restored) == 2 and all(_equal(a, b) for a, b in zip(restored, queues[rank]))
    (first, second) = restore_queue(tensors, plain, slice(0, 8))  # one reader: the widest writer's widths
    assert first.rollout.prompt_ids.shape == (8, 5) and first.rollout.completion_ids.shape == (8, 6)
    assert torch.equal(first.rollout.prompt_ids[:4, 2:], queues[0][0].rollout.prompt_ids)
    assert (first.rollout.prompt_ids[:4, :2] == PAD).all() and (first.rollout.prompt_mask[:4, :2] == 0).all()
    assert torch.equal(first.rollout.completion_ids[4:, :4], queues[1][0].rollout.completion_ids)
    assert (first.rollout.completion_ids[4:, 4:] == PAD).all() and (first.behaviour_logp[4:, 4:] == 0).all()
    assert torch.equal(first.rewards, torch.cat([queues[0][0].rewards, queues[1][0].rewards]))
    assert (second.step, second.version, second.rollout.completion_ids.shape) == (4, 2, (8, 3))


def test_an_empty_queue_saves_nothing():
    assert _save([[]]) == ({}, [])


# --- resuming a killed run, the queue read from its checkpoint


def _parity_reward(completions, references):
    return [float(len(text) % 2) for text in completions]


def _write_cell(folder: Path, base, data) -> Path:
    settings = tiny_settings(
        base, data, kl="k3-loss", beta=0.1, async_lag=2, steps=6, checkpoint_every=1, eval_every=2, threads=1, seed=3
    ) | {"reward": "parity", "advantage": "group-mean", "ratio_clamp": 8.0}
    folder.mkdir(parents=True)
    (folder / "cell.yaml").write_text(yaml.safe_dump(settings))
    return folder / "cell.yaml"


def _without_times(records: list[dict]) -> list[dict]:
    return [{key: value for key, value in record.items() if not key.startswith("time/")} for record in records]


@pytest.fixture(scope="module")
def uninterrupted(tiny_base, arith_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("uninterrupted")
    cell = _write_cell(folder / "cell", tiny_base, arith_data)
    subprocess.run([sys.executable, str(PARITY_CLI), "train", "--config", str(cell), "--out", str(folder / "train")], check=True, capture_output=True, env=os.environ | {"OMP_NUM_THREADS": "1"})  # fmt: skip
    return folder / "train"


@pytest.mark.slow  # a killed process, then its resume, per position
@pytest.mark.parametrize("killed_at", [1, 2, 3], ids=["queue partly sampled (s < k)", "s = k", "s > k"])
def test_a_run_killed_after_a_checkpoint_resumes_to_the_uninterrupted_run(
    tiny_base, arith_data, tmp_path, uninterrupted, monkeypatch, killed_at
):
    """SIGKILL right after the checkpoint of step s (lag 2, so its queue holds the rollouts of
    steps s and s + 1, sampled by θ_{s−2} and θ_{s−1}, or θ0 for the first steps); started again,
    the cell loads them instead of sampling anew and ends bit for bit where the uninterrupted
    run ends, each step's metrics written once."""
    cell = _write_cell(tmp_path / "cell", tiny_base, arith_data)
    out = tmp_path / "train"
    command = [sys.executable, str(PARITY_CLI), "train", "--config", str(cell), "--out", str(out)]
    env = os.environ | {"OMP_NUM_THREADS": "1", "KLRL_TEST_CRASH_AT": str(killed_at)}
    assert subprocess.run(command, env=env, capture_output=True).returncode == -9  # SIGKILL
    assert [path.name for path in checkpoint_folders(out)][0] == f"step-{killed_at:08d}"
    plain = torch.load(checkpoint_folders(out)[0] / PLAIN, weights_only=True)["plain"]
    assert [(entry["step"], entry["version"]) for entry in plain["queue"]] == [
        (step, max(0, step - 2)) for step in (killed_at, killed_at + 1)
    ]
    before = [record for record in read_metrics(out / "metrics.jsonl") if record["step"] < killed_at]
    monkeypatch.setattr(trainer_module, "get_reward", lambda _: _parity_reward)
    assert klrl(["train", "--config", str(cell), "--out", str(out)]) == 0
    records = read_metrics(out / "metrics.jsonl")
    assert [record for record in records if record["step"] < killed_at] == before  # kept, not redone
    assert _without_times(records) == _without_times(read_metrics(uninterrupted / "metrics.jsonl"))
    whole, resumed = (load_file(folder / "final" / "model.safetensors") for folder in (uninterrupted, out))
    assert all(torch.equal(whole[name], resumed[name]) for name in whole)


def test_a_checkpoint_of_the_stale_weights_layout_is_refused_in_one_line(tiny_base, arith_data, tmp_path, capsys):
    cell = _write_cell(tmp_path / "cell", tiny_base, arith_data)
    out = tmp_path / "train"
    settings = yaml.safe_load(cell.read_text()) | {"steps": 2, "reward": "arithmetic"}
    cell.write_text(yaml.safe_dump(settings))
    with pytest.MonkeyPatch.context() as patch:  # stop right after the checkpoint of step 1
        patch.setattr(trainer_module.Trainer, "_finish", lambda self, status, reason: None)
        klrl(["train", "--config", str(cell), "--out", str(out)])
    folder = checkpoint_folders(out)[0]
    state = torch.load(folder / PLAIN, weights_only=True)
    plain = {key: value for key, value in state["plain"].items() if key != "queue"} | {"history_length": 2}
    torch.save(state | {"plain": plain}, folder / PLAIN)  # what a klrl that kept the stale weights wrote
    files = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    capsys.readouterr()
    assert klrl(["train", "--config", str(cell), "--out", str(out)]) != 0
    (error,) = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # beside progress bars
    assert error.startswith(f"klrl train: error: {folder}: refused, written by a klrl that kept the stale weights")
    assert "queue of rollouts" in error
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == files
