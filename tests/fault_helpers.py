"""Shared by the fault-injection suites: comparing a cell's training output with an
uninterrupted run's, and waiting on a process's files before killing it."""

import json
import time

import torch
from safetensors.torch import load_file

from klrl.training.record import read_metrics, read_status


def strip_times(records):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]


def assert_same_cell(folder, whole):
    """Final weights bit for bit, the metrics history, the status, and no checkpoint left."""
    ours, theirs = load_file(folder / "final" / "model.safetensors"), load_file(whole / "final" / "model.safetensors")
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[name], theirs[name]) for name in ours)
    assert strip_times(read_metrics(folder / "metrics.jsonl")) == strip_times(read_metrics(whole / "metrics.jsonl"))
    when = ("finished",)  # the time it finished: the one field a rerun cannot share
    assert {k: v for k, v in read_status(folder).items() if k not in when} == {
        k: v for k, v in read_status(whole).items() if k not in when
    }
    assert not any(folder.glob("checkpoint*"))


def wait_for(condition, process=None, seconds=300.0):
    """Poll `condition` every 5 ms until it holds, `process` (a Popen) ends, or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while not condition() and (process is None or process.poll() is None) and time.monotonic() < deadline:
        time.sleep(0.005)


def lock_holder(path):
    """The pid a klrl.core.folder_lock file names, or None (no lock, or one being written)."""
    try:
        return json.loads(path.read_text())["pid"]
    except (OSError, ValueError):
        return None


def line_count(path):
    return path.read_bytes().count(b"\n") if path.exists() else 0
