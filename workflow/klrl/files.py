"""Small file helpers shared by every step: content hashes, YAML with located errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_yaml(path: Path):
    """A YAML file's content; a syntax error is a ValueError naming `file:line:column`."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ValueError(f"{where}: not valid YAML ({error.problem or error.context})") from None
