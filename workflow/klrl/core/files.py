"""File helpers every step shares: whole-or-absent writes, checked JSONL, content hashes, YAML
with located errors.

`write_atomic` is the only way a result file is written: to `<name>.tmp` beside it, flushed
(and with `durable`, synced to disk with its folder), then renamed over it, so a reader sees
the old file or the new one, never a part. `read_jsonl` is the only JSONL reader: every line a
JSON object, a bad one named `file:line`.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, NamedTuple

import yaml


def write_atomic(
    path: Path,
    content: str | bytes | Callable[[BinaryIO], None],
    *,
    durable: bool = False,
    previous: Path | None = None,
) -> None:
    """Write `content` (text, bytes, or a function writing to the open binary file) to `path`,
    whole or not at all. `durable`: fsync the file before the rename and the folder after it
    (a power cut keeps it). `previous`: the file at `path`, if any, is first renamed to it, so a
    kill at any moment leaves one whole version."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as handle:
        if callable(content):
            content(handle)
        else:
            handle.write(content.encode() if isinstance(content, str) else content)
        handle.flush()
        if durable:
            os.fsync(handle.fileno())
    if previous is not None and path.exists():
        path.replace(previous)
    tmp.replace(path)
    if durable:
        descriptor = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


class JsonLine(NamedTuple):
    number: int  # 1-based line number
    record: dict
    size: int  # bytes, with the newline


def read_jsonl(path: Path, *, check: Callable[[dict], None] | None = None, torn_tail: bool = False) -> list[JsonLine]:
    """Every line of a JSONL file as a JSON object, in file order. A line that is not UTF-8, not
    JSON, not an object or refused by `check` (a ValueError saying why) is a ValueError naming
    `file:line`. With `torn_tail`, a last line cut short by an interrupted write (no newline, or
    a bad last line) is dropped with a warning instead.

    >>> import tempfile; path = Path(tempfile.mkdtemp()) / "rows.jsonl"
    >>> _ = path.write_bytes(b'{"id": 1}\\n[2]\\n')
    >>> read_jsonl(path)
    Traceback (most recent call last):
    ...
    ValueError: ...rows.jsonl:2: a row must be a JSON object
    """
    *lines, tail = Path(path).read_bytes().split(b"\n")
    if tail and not torn_tail:
        lines.append(tail)
    records = []
    for number, raw in enumerate(lines, 1):
        try:
            record = _record(raw, check)
        except ValueError as error:
            if torn_tail and number == len(lines) and not tail:
                warnings.warn(f"{path}:{number}: torn last line (an interrupted write), dropped", stacklevel=2)
                return records
            raise ValueError(f"{path}:{number}: {error}") from None
        records.append(JsonLine(number, record, len(raw) + 1))
    if tail and torn_tail:
        warnings.warn(f"{path}:{len(lines) + 1}: torn last line (an interrupted write), dropped", stacklevel=2)
    return records


def _record(raw: bytes, check: Callable[[dict], None] | None) -> dict:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8 (byte 0x{raw[error.start]:02x} at column {error.start + 1})") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg})") from None
    if not isinstance(record, dict):
        raise ValueError("a row must be a JSON object")
    if check is not None:
        check(record)
    return record


def write_jsonl(path: Path, records: list[dict], *, sort_keys: bool = False) -> None:
    """One JSON object per line (UTF-8), written whole or not at all."""
    write_atomic(
        path, "".join(json.dumps(record, ensure_ascii=False, sort_keys=sort_keys) + "\n" for record in records)
    )


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    with Path(path).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def read_yaml(path: Path):
    """A YAML file's content; a syntax error is a ValueError naming `file:line:column`."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ValueError(f"{where}: not valid YAML ({error.problem or error.context})") from None
