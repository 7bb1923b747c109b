"""Training state on disk: every process writes its own shards, a checkpoint is committed whole or
not at all, and it is read without running any code.

A checkpoint holds everything the next step depends on, in two parts, in one folder
`checkpoints/step-<step>/` of the cell's output folder:
- the tensors (the policy's weights, the AdamW moments, and off-policy the queued rollouts of
  klrl.training.rollout_queue), in torch.distributed.checkpoint's format (DCP): each process
  writes the shards it holds (`__<rank>_0.distcp`) and rank 0 the index of them all
  (`.metadata`). No process gathers a model to write or read one, and DCP reshards on load,
  so a checkpoint written by N processes resumes under M;
- `state.pt`: the plain values (the step, the scheduler, the optimizer's settings, the RNG
  states, each queued rollout's step, version and shapes), read with `torch.load(weights_only=True)`.

Nothing in a checkpoint runs code on load. DCP reads `.metadata` with `pickle.load`; here it is
first read by an unpickler that admits only the classes of DCP's index (`INDEX_CLASSES`), so a
crafted one is refused with `UnsafeCheckpoint`. A class is admitted by what it is, not by the
module a pickle names: under whatever name an already imported module holds one of those
classes (a torch that moved one, an index written before the move), and under no other. Its
byte items (which DCP would unpickle whole) are refused too: a klrl checkpoint holds tensors only.

A checkpoint is written to `step-<step>.tmp/` by every process, each file synced, then renamed
by rank 0 once all have written; the last two are kept. One that cannot be read (a file torn or
missing, a key absent) is skipped with a warning for the one before it. One that the trainer
refuses (`RefusedCheckpoint`: crafted, or of a layout it no longer reads, such as the stale
weights an earlier klrl kept off-policy) stops the resume with one line, nothing overwritten. A
single-file checkpoint of an earlier klrl (`checkpoint.pt`) is refused with a line that says what to do.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import shutil
import sys
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import torch

from klrl.core.files import write_atomic

FOLDER = "checkpoints"
PLAIN = "state.pt"
KEEP = 2
LEGACY = ("checkpoint.pt", "checkpoint.prev.pt", "checkpoint.pt.tmp")
REQUIRED_KEYS = ("step", "plain", "rng")
INDEX_CLASSES = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata",
        "MetadataIndex",
        "StorageMeta",
        "ChunkStorageMetadata",
        "TensorProperties",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "_MEM_FORMAT_ENCODING",
    },
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch.serialization": {"_get_layout"},
    "torch": {"Size"},
    "pathlib": {"PosixPath", "WindowsPath", "PurePosixPath"},
    "pathlib._local": {"PosixPath", "WindowsPath", "PurePosixPath"},  # where Python 3.13 pickles them from
}  # where each class of DCP's index lived when klrl was written; `_index_objects` finds them now


class RefusedCheckpoint(ValueError):
    """A checkpoint that must not be resumed, nor skipped for an older one: its reason in one line."""


class UnsafeCheckpoint(RefusedCheckpoint):
    """A checkpoint file that holds more than tensors and plain values: refused, never run."""


def checkpoint_folders(folder: Path) -> list[Path]:
    """The committed checkpoints of a cell's output folder, newest first."""
    root = Path(folder) / FOLDER
    found = [path for path in root.glob("step-*") if path.is_dir() and path.name[5:].isdigit()] if root.is_dir() else []
    return sorted(found, key=lambda path: int(path.name[5:]), reverse=True)


def _dcp():
    """torch.distributed.checkpoint, imported when a checkpoint is written or read: importing it
    costs about 0.4 s, which a train job without checkpoints does not pay."""
    import torch.distributed.checkpoint as dcp

    return dcp


@contextmanager
def _quiet_dcp():
    """DCP without its notes: the single-process warning, and the traceback it logs for an
    unreadable checkpoint (which `load_checkpoint` reports in one line)."""
    logger = logging.getLogger("c10d-NullHandler-dcp_logger")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*assuming the intent is to (save|load) in a single process")
            yield
    finally:
        logger.setLevel(level)


def _sync_folder(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def save_checkpoint(
    folder: Path, state: dict, *, is_main: bool = True, barrier: Callable[[], None] = lambda: None
) -> None:
    """Commit `state` ({"step", "tensors": nested dict of tensors or DTensors, "plain": plain
    values}) as the newest checkpoint. Collective: every process calls it with its own shards;
    `is_main` (rank 0) writes the plain values, commits and keeps the last two."""
    root = Path(folder) / FOLDER
    final = root / f"step-{state['step']:08d}"
    staging = final.with_name(final.name + ".tmp")
    if is_main:
        shutil.rmtree(staging, ignore_errors=True)  # a write cut short
        staging.mkdir(parents=True)
    barrier()
    dcp = _dcp()
    with _quiet_dcp():
        dcp.save(state["tensors"], storage_writer=dcp.FileSystemWriter(staging, sync_files=True))
    if is_main:
        version, internal, gauss = random.getstate()
        rng = {
            "torch": torch.get_rng_state(),
            "python": {"version": version, "internal": list(internal), "gauss": gauss},
        }
        plain = {"step": state["step"], "plain": state["plain"], "rng": rng}
        write_atomic(staging / PLAIN, lambda handle: torch.save(plain, handle), durable=True)
        _sync_folder(staging)
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        _sync_folder(root)
        for old in checkpoint_folders(folder)[KEEP:]:
            shutil.rmtree(old)
    barrier()


def _index_objects() -> dict[int, object]:
    """The objects `INDEX_CLASSES` names, by id, as this torch and Python define them (the names
    one of them no longer has are skipped)."""
    import importlib

    objects = {}
    for module, names in INDEX_CLASSES.items():
        try:
            owner = importlib.import_module(module)
        except ImportError:
            continue
        for name in names:
            if hasattr(owner, name):
                objects[id(getattr(owner, name))] = getattr(owner, name)
    return objects


class _IndexUnpickler(pickle.Unpickler):
    """Admits a global only when it is one of the index's classes (or a torch dtype), looked up
    in modules already imported: nothing is imported, no other callable is returned."""

    admitted: dict[int, object] = {}

    def find_class(self, module: str, name: str):
        if not _IndexUnpickler.admitted:
            _IndexUnpickler.admitted = _index_objects()
        found = getattr(sys.modules.get(module), name, None) if "." not in name else None
        if found is not None and (id(found) in self.admitted or (module == "torch" and isinstance(found, torch.dtype))):
            return found
        raise UnsafeCheckpoint(f"GLOBAL {module}.{name}")


def _read_index(path: Path):
    """DCP's `.metadata` of a checkpoint, through the unpickler that admits its classes only."""
    try:
        with (path / ".metadata").open("rb") as handle:
            index = _IndexUnpickler(handle).load()
    except UnsafeCheckpoint as error:
        raise UnsafeCheckpoint(
            f"{path}/.metadata: refused, it would run code on load ({error}); klrl never writes such a file. Delete it if you do not know where it came from"
        ) from None
    except Exception as error:  # torn, truncated or missing
        raise ValueError(f"{path}/.metadata: unreadable ({_first_line(error)})") from None
    bytes_items = [
        key for key, item in index.state_dict_metadata.items() if type(item).__name__ == "BytesStorageMetadata"
    ]
    if bytes_items:
        raise UnsafeCheckpoint(
            f"{path}/.metadata: refused, {bytes_items[0]!r} is a pickled object, not a tensor; klrl never writes such a file"
        )
    return index


def _first_line(error: BaseException, width: int = 120) -> str:
    """What went wrong, in one line: for DCP's CheckpointException, the first failing rank's error."""
    failures = getattr(error, "failures", None)
    if failures:
        error = getattr(next(iter(failures.values())), "exception", error)
    return (str(error).splitlines() or [type(error).__name__])[0][:width]


def _read_plain(path: Path) -> dict:
    """A checkpoint's plain values; UnsafeCheckpoint for a crafted file, ValueError for a corrupt one."""
    try:
        state = torch.load(path / PLAIN, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as error:
        raise UnsafeCheckpoint(
            f"{path / PLAIN}: refused, it would run code on load ({_first_line(error)}); klrl never writes such a file. "
            "Delete it if you do not know where it came from"
        ) from None
    except Exception as error:  # torn or truncated: whatever the zip reader or unpickler raised
        raise ValueError(f"{path / PLAIN}: unreadable ({_first_line(error)})") from None
    missing = [key for key in REQUIRED_KEYS if not isinstance(state, dict) or key not in state]
    if missing:
        raise ValueError(f"{path / PLAIN}: not a klrl checkpoint (no {missing[0]!r})")
    return state


def _empty_like(tree):
    return (
        {key: _empty_like(value) for key, value in tree.items()} if isinstance(tree, dict) else torch.empty_like(tree)
    )


def load_checkpoint(folder: Path, layout: Callable[[dict], dict]) -> dict | None:
    """The newest readable checkpoint ({"step", "plain", "tensors"}, the RNG states restored), or
    None when there is none. `layout(plain)` gives a nested dict of tensors shaped as this
    process holds them (its shards); the checkpoint is read into new tensors of that layout.
    Collective when the model is sharded. A corrupt checkpoint is skipped with a warning; a
    crafted one raises UnsafeCheckpoint, one `layout` refuses RefusedCheckpoint (both name the
    folder); an old single-file one, ValueError."""
    legacy = [name for name in LEGACY if (Path(folder) / name).exists()]
    if legacy:
        raise ValueError(
            f"{Path(folder) / legacy[0]}: a single-file checkpoint of an earlier klrl, which this one does not resume; "
            f"delete {', '.join(LEGACY[:2])} in {folder} to train the cell again from step 0, or finish it with the klrl that wrote it"
        )
    dcp = _dcp()
    from torch.distributed.checkpoint.api import CheckpointException

    for path in checkpoint_folders(folder):
        try:
            state = _read_plain(path)
            _read_index(path)
            try:
                tensors = _empty_like(layout(state["plain"]))
            except RefusedCheckpoint as error:
                raise RefusedCheckpoint(f"{path}: refused, {error}") from None
            with _quiet_dcp():
                dcp.load(tensors, storage_reader=dcp.FileSystemReader(path))
        except RefusedCheckpoint:
            raise
        except (ValueError, KeyError, RuntimeError, OSError, CheckpointException) as error:
            warnings.warn(f"{path}: {_first_line(error, 400).removeprefix(str(path) + '/')}; skipped", stacklevel=2)
            continue
        torch.set_rng_state(state["rng"]["torch"])
        python = state["rng"]["python"]
        random.setstate((python["version"], tuple(python["internal"]), python["gauss"]))
        return state | {"tensors": tensors}
    return None


def remove_checkpoints(folder: Path) -> None:
    """Delete a finished cell's checkpoints (and any of an interrupted write)."""
    shutil.rmtree(Path(folder) / FOLDER, ignore_errors=True)
