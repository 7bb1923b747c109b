"""Training state on disk: written whole or not at all, so a kill at any moment can resume.

One file, `checkpoint.pt`, holds everything the next step depends on: the step reached,
the policy weights, the optimizer and scheduler, the RNG states, the data position and the
stale-policy queue of off-policy runs. It is written to a temporary name and renamed.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import torch

NAME = "checkpoint.pt"


def save_checkpoint(folder: Path, state: dict) -> None:
    path = Path(folder) / NAME
    tmp = path.with_suffix(".pt.tmp")
    state = state | {"rng": {"torch": torch.get_rng_state(), "python": random.getstate()}}
    with tmp.open("wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def load_checkpoint(folder: Path) -> dict | None:
    """The saved state (with the RNG states restored), or None when there is none."""
    path = Path(folder) / NAME
    if not path.exists():
        return None
    state = torch.load(path, weights_only=False)
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["python"])
    return state
