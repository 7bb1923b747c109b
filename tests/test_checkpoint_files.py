"""Checkpoint files one by one: crafted, corrupt, of an older klrl, and the RNG states they
carry (the faults at known points of a training run are in tests/test_faults.py, which counts
these cases for docs/reliability.md)."""

import os
import pickle
import random
import shutil
import warnings
from pathlib import Path

import pytest
import torch
import yaml

from klrl.cli import main as klrl
from klrl.training.checkpoint import UnsafeCheckpoint, checkpoint_folders, load_checkpoint, save_checkpoint

from conftest import tiny_settings

CORRUPT_CHECKPOINTS = 3  # a truncated newest, an empty previous, one without its keys
CRAFTED_FILES = 3  # a checkpoint with a code-running pickle (its state.pt, its index), one with a pickled object


def newest_checkpoint(folder):
    return checkpoint_folders(folder)[0]


@pytest.fixture(scope="module")
def cell_config(tiny_base, arith_data, tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "cell.yaml"
    path.write_text(yaml.safe_dump(tiny_settings(tiny_base, arith_data, "k3-loss", 0.1, threads=1)))
    return path


def _state(step):
    return {"step": step, "tensors": {"policy": {"w": torch.full((2,), float(step))}}, "plain": {"note": "x"}}


def _layout(plain):
    return {"policy": {"w": torch.zeros(2)}}


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def _crafted_plain(path):
    torch.save({"step": 3, "plain": _Payload(), "rng": {}}, path / "state.pt")


def _crafted_index(path):
    (path / ".metadata").write_bytes(pickle.dumps(_Payload()))


@pytest.mark.parametrize(
    "craft, refused",
    [
        (_crafted_plain, r"state\.pt: refused, it would run code on load"),
        (_crafted_index, r"\.metadata: refused, it would run code on load \(GLOBAL posix\.system\)"),
    ],
)
def test_a_crafted_checkpoint_is_refused_without_running_it(tmp_path, monkeypatch, cell_config, craft, refused):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "train"
    save_checkpoint(out, _state(3))
    craft(newest_checkpoint(out))
    with pytest.raises(UnsafeCheckpoint, match=refused):
        load_checkpoint(out, _layout)
    assert klrl(["train", "--config", str(cell_config), "--out", str(out)]) == 2
    assert not (tmp_path / "PWNED").exists()
    target = newest_checkpoint(out) / ("state.pt" if craft is _crafted_plain else ".metadata")
    pickle.loads(target.read_bytes()) if craft is _crafted_index else torch.load(
        target, weights_only=False
    )  # the unguarded way runs it
    assert (tmp_path / "PWNED").exists()


def test_the_index_reader_admits_dcps_classes_by_identity_wherever_torch_keeps_them():
    """A torch that moves a class of DCP's index (here: named from the package that re-exports
    it) still reads its checkpoints; a callable that is not one of them is refused under any
    name, and a module not yet imported is never imported."""
    import io

    from torch.distributed.checkpoint.metadata import Metadata

    from klrl.training.checkpoint import _IndexUnpickler

    moved = pickle.dumps(Metadata, protocol=0).replace(
        b"torch.distributed.checkpoint.metadata\n", b"torch.distributed.checkpoint\n"
    )
    assert moved.startswith(b"ctorch.distributed.checkpoint\nMetadata\n")
    assert _IndexUnpickler(io.BytesIO(moved)).load() is Metadata
    assert _IndexUnpickler(io.BytesIO(b"ctorch\nbfloat16\n.")).load() is torch.bfloat16
    for module, name in (("os", "system"), ("builtins", "eval"), ("torch", "load"), ("antigravity", "fly")):
        with pytest.raises(UnsafeCheckpoint, match=f"GLOBAL {module}.{name}"):
            _IndexUnpickler(io.BytesIO(f"c{module}\n{name}\n.".encode())).load()
    assert "antigravity" not in __import__("sys").modules


def test_the_index_reader_admits_a_dtype_under_torchs_own_name_only(monkeypatch):
    """A dtype is read as `torch.<dtype>`; the same object named from another module is refused."""
    import io
    import sys
    import types

    from klrl.training.checkpoint import _IndexUnpickler

    elsewhere = types.ModuleType("elsewhere")
    elsewhere.bfloat16 = torch.bfloat16
    monkeypatch.setitem(sys.modules, "elsewhere", elsewhere)
    assert _IndexUnpickler(io.BytesIO(b"ctorch\nbfloat16\n.")).load() is torch.bfloat16
    with pytest.raises(UnsafeCheckpoint, match="GLOBAL elsewhere.bfloat16"):
        _IndexUnpickler(io.BytesIO(b"celsewhere\nbfloat16\n.")).load()


def test_a_checkpoint_with_pickled_objects_is_refused(tmp_path):
    """DCP would unpickle a byte item whole (torch.load without weights_only): klrl writes tensors only."""
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    save_checkpoint(tmp_path, _state(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DCP's notes on overwriting in a single process
        dcp.save(
            {"policy": {"w": torch.zeros(2)}, "extra": {"object": [1, 2]}}, checkpoint_id=newest_checkpoint(tmp_path)
        )
    with pytest.raises(UnsafeCheckpoint, match=r"'extra\.object' is a pickled object, not a tensor"):
        load_checkpoint(tmp_path, _layout)


def test_a_corrupt_newest_checkpoint_is_skipped_for_the_previous_one(tmp_path):
    for step in (2, 4, 6):
        save_checkpoint(tmp_path, _state(step))
    assert [path.name for path in checkpoint_folders(tmp_path)] == [
        "step-00000006",
        "step-00000004",
    ]  # the last two kept
    os.truncate(newest_checkpoint(tmp_path) / "__0_0.distcp", 10)
    with pytest.warns(UserWarning, match=r"step-00000006: .*; skipped"):
        state = load_checkpoint(tmp_path, _layout)
    assert state["step"] == 4 and torch.equal(state["tensors"]["policy"]["w"], torch.full((2,), 4.0))
    (checkpoint_folders(tmp_path)[1] / "state.pt").write_bytes(b"")
    with pytest.warns(UserWarning) as skipped:
        assert load_checkpoint(tmp_path, _layout) is None  # nothing readable: start over (deterministically)
    assert [Path(str(w.message).split(": ", 1)[0]).name for w in skipped] == ["step-00000006", "step-00000004"]
    shutil.rmtree(tmp_path / "checkpoints")
    save_checkpoint(tmp_path, _state(1))
    torch.save({"step": 1}, newest_checkpoint(tmp_path) / "state.pt")
    with pytest.warns(UserWarning, match="not a klrl checkpoint \\(no 'plain'\\)"):
        assert load_checkpoint(tmp_path, _layout) is None


def test_an_old_single_file_checkpoint_is_refused_with_what_to_do(tmp_path, cell_config, capsys):
    torch.save({"step": 2}, tmp_path / "checkpoint.pt")
    with pytest.raises(
        ValueError,
        match=r"checkpoint\.pt: a single-file checkpoint of an earlier klrl, .*delete checkpoint\.pt, checkpoint\.prev\.pt",
    ):
        load_checkpoint(tmp_path, _layout)
    assert klrl(["train", "--config", str(cell_config), "--out", str(tmp_path)]) == 2
    assert "single-file checkpoint of an earlier klrl" in capsys.readouterr().err


def test_a_checkpoint_round_trips_the_rng_states(tmp_path):
    random.seed(5)
    torch.manual_seed(5)
    save_checkpoint(tmp_path, _state(2))
    expected = (random.random(), torch.rand(3))
    random.seed(0)
    torch.manual_seed(0)
    state = load_checkpoint(tmp_path, _layout)
    assert torch.equal(state["tensors"]["policy"]["w"], torch.full((2,), 2.0)) and state["plain"] == {"note": "x"}
    assert random.random() == expected[0] and torch.equal(torch.rand(3), expected[1])
