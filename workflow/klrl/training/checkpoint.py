"""Training state on disk: written whole or not at all, read without running any code.

A checkpoint holds everything the next step depends on: the step reached, the policy weights,
the optimizer and scheduler, the RNG states and the stale-policy queue of
off-policy runs, all as tensors and plain values (numbers, strings, lists, dicts). It is read
back with `torch.load(weights_only=True)`, so a crafted file (a pickle that would call a
function on load) is refused with `UnsafeCheckpoint`, never executed.

The last two checkpoints are kept: `checkpoint.pt` (the newest) and `checkpoint.prev.pt`.
Each is written to a temporary name, flushed to disk and renamed, so a kill at any moment
leaves at least one whole checkpoint. One that cannot be read (truncated, torn, missing a key)
is skipped with a warning, and the older one is used.
"""

from __future__ import annotations

import pickle
import random
import re
import warnings
from pathlib import Path

import torch

from klrl.files import write_atomic

NAME = "checkpoint.pt"
PREVIOUS = "checkpoint.prev.pt"
REQUIRED_KEYS = ("step", "policy", "optimizer", "scheduler", "history", "rng")


class UnsafeCheckpoint(ValueError):
    """A checkpoint file that holds more than tensors and plain values: refused, never run."""


def checkpoint_files(folder: Path) -> list[Path]:
    """The checkpoint files of a folder, newest first (those that exist)."""
    return [path for path in (Path(folder) / NAME, Path(folder) / PREVIOUS) if path.exists()]


def save_checkpoint(folder: Path, state: dict) -> None:
    """Write `state` (tensors and plain values) as the newest checkpoint; the previous one is kept."""
    folder = Path(folder)
    path, previous = folder / NAME, folder / PREVIOUS
    version, internal, gauss = random.getstate()
    rng = {"torch": torch.get_rng_state(), "python": {"version": version, "internal": list(internal), "gauss": gauss}}
    write_atomic(path, lambda handle: torch.save(state | {"rng": rng}, handle), durable=True, previous=previous)


def _read(path: Path) -> dict:
    """One checkpoint file's state; UnsafeCheckpoint for a crafted one, ValueError for a corrupt one."""
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as error:
        found = re.search(r"GLOBAL [\w.]+|Unsupported operand \d+", str(error))
        what = found.group(0) if found else "an object that is not a tensor or a plain value"
        raise UnsafeCheckpoint(
            f"{path}: refused, it would run code on load ({what}); klrl never writes such a file. "
            "Delete it if you do not know where it came from"
        ) from None
    except Exception as error:  # torn or truncated: whatever the zip reader or unpickler raised
        first_line = (str(error).splitlines() or [type(error).__name__])[0]
        raise ValueError(f"{path}: unreadable ({first_line[:120]})") from None
    missing = [key for key in REQUIRED_KEYS if not isinstance(state, dict) or key not in state]
    if missing:
        raise ValueError(f"{path}: not a klrl checkpoint (no {missing[0]!r})")
    return state


def load_checkpoint(folder: Path) -> dict | None:
    """The newest readable checkpoint's state (with the RNG states restored), or None when there
    is none; a corrupt one is skipped with a warning, a crafted one raises UnsafeCheckpoint."""
    for path in checkpoint_files(folder):
        try:
            state = _read(path)
        except UnsafeCheckpoint:
            raise
        except ValueError as error:
            warnings.warn(f"{error}; skipped", stacklevel=2)
            continue
        torch.set_rng_state(state["rng"]["torch"])
        python = state["rng"]["python"]
        random.setstate((python["version"], tuple(python["internal"]), python["gauss"]))
        return state
    return None


def remove_checkpoints(folder: Path) -> None:
    """Delete a finished cell's checkpoints (and any temporary file of an interrupted write)."""
    for name in (NAME, PREVIOUS, NAME + ".tmp"):
        (Path(folder) / name).unlink(missing_ok=True)
