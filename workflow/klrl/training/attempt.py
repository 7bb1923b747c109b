"""A cell's attempts: one per resolved configuration, each with its own files (and MLflow run:
klrl.tracking.attempt_runs).

An attempt is identified by `attempt_id`: a hash of the cell's resolved TrainConfig without
the fields that change how it is computed but not what (`HOW_FIELDS`: threads, device,
activation checkpointing, reference offload). At the start of `klrl train` the config.yaml in
the cell's train folder names the attempt whose files are there; when it differs from the new
one (a setting changed), that attempt's files (`ATTEMPT_FILES`: metrics, checkpoints,
status.json, final/, its run record and config.yaml, moved last) are moved to
`superseded/<n>/` and the new attempt starts from step 0: nothing computed is lost, and no
checkpoint of one configuration is resumed under another. A folder whose config.yaml is torn
or of an older code's keys counts as another attempt; files without a config.yaml (it is
written before any other) are taken as this attempt's, as before attempts existed. Re-running
the same configuration (after a kill) keeps the files and resumes.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import yaml

from klrl.core.files import write_atomic
from klrl.core.paths import CONFIG, FINAL, METRICS, RUN_RECORD, STATUS
from klrl.training.checkpoint import FOLDER, LEGACY
from klrl.training.config import TrainConfig, load_config

HOW_FIELDS = ("threads", "device", "activation_checkpointing", "reference_offload")
SUPERSEDED = "superseded"
# config.yaml last: a move killed half-way leaves it, so the next start finishes the move
ATTEMPT_FILES = (METRICS, FOLDER, *LEGACY, STATUS, FINAL, RUN_RECORD, CONFIG)


def attempt_id(config: TrainConfig) -> str:
    """16 hex digits naming what the cell computes (not how: `HOW_FIELDS` are left out)."""
    values = {key: value for key, value in config.to_dict().items() if key not in HOW_FIELDS}
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def _saved_attempt(folder: Path) -> str | None:
    """The attempt of the files in `folder` by its config.yaml; '' when it is unreadable or
    not a config of this code (another attempt), None when there is none."""
    path = folder / CONFIG
    if not path.exists():
        return None
    try:
        return attempt_id(load_config(path))
    except (ValueError, TypeError, OSError):
        return ""


def _next_slot(folder: Path) -> Path:
    """superseded/<n>/ for the files being moved: the newest one again when a move into it
    was cut short (it lacks config.yaml), else a new one."""
    root = folder / SUPERSEDED
    numbers = sorted(int(path.name) for path in root.glob("*") if path.name.isdigit()) if root.is_dir() else []
    if numbers and not (root / str(numbers[-1]) / CONFIG).exists():
        return root / str(numbers[-1])
    return root / str((numbers[-1] if numbers else 0) + 1)


def begin_attempt(folder: Path, config: TrainConfig) -> Path | None:
    """Make `folder` hold `config`'s attempt: the files of another attempt are moved to
    superseded/<n>/ (returned; None when nothing was moved), then config.yaml is written."""
    folder = Path(folder)
    saved = _saved_attempt(folder)
    present = [name for name in ATTEMPT_FILES if (folder / name).exists()]
    slot = None
    if saved is not None and saved != attempt_id(config) and present:  # files without a config.yaml: this attempt's
        slot = _next_slot(folder)
        slot.mkdir(parents=True, exist_ok=True)
        for name in present:
            os.replace(folder / name, slot / name)
    write_config(folder, config)
    return slot


def write_config(folder: Path, config: TrainConfig) -> None:
    """The resolved config.yaml, whole or absent."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / CONFIG, yaml.safe_dump(config.to_dict(), sort_keys=True))
