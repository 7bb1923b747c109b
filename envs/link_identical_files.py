"""Hard-link a venv's installed files to the same files in the project's other venvs.

The project's venvs hold many copies of the same bytes: torch 2.13.0's CPU build in .venv,
.venv-vllm and both audit venvs, and PyPI's CUDA libraries (the nvidia-* wheels) in .venv-py3.12
and .venv-py3.13. After a venv's packages are installed, each of its files at least MIN_BYTES long
that is byte for byte the file at the same path in another finished venv's site-packages becomes a
hard link to that file: one copy on disk instead of several (7 GiB fewer for `make test`, in
benchmarks/CI.md). A venv counts as finished once one of make's stamps is in it.

pip never writes an installed file in place: an upgrade or uninstall removes the file and writes a
new one, so a venv's change never reaches another venv through a link. Where the filesystem
refuses hard links, the files stay copies and one line says so.

    python envs/link_identical_files.py TARGET_VENV OTHER_VENV...
"""

from __future__ import annotations

import filecmp
import os
import stat
import sys
from pathlib import Path

MIN_BYTES = 64 * 1024  # smaller files hold little of a venv's bytes and cost a comparison each
STAMPS = (".installed", ".installed-packages")


def site_packages(venv: Path) -> Path | None:
    """VENV/lib/pythonX.Y/site-packages, or None where the venv has none."""
    found = sorted(venv.glob("lib/python3*/site-packages"))
    return found[0] if found else None


def large_files(root: Path) -> dict[str, os.stat_result]:
    """Every regular file under ROOT of at least MIN_BYTES, by its path relative to ROOT."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            status = os.lstat(path)
            if stat.S_ISREG(status.st_mode) and status.st_size >= MIN_BYTES:
                files[os.path.relpath(path, root)] = status
    return files


def link_identical(target: Path, others: list[Path]) -> tuple[int, int]:
    """Replace TARGET's large files by hard links to identical ones in OTHERS (finished venvs
    only); returns (files linked, bytes freed)."""
    target_packages = site_packages(target)
    if target_packages is None:
        return 0, 0
    sources: dict[tuple[str, int], Path] = {}
    for other in others:
        packages = site_packages(other)
        if other.resolve() == target.resolve() or packages is None:
            continue
        if not any((other / stamp).exists() for stamp in STAMPS):
            continue
        for relative, status in large_files(packages).items():
            sources.setdefault((relative, status.st_size), packages / relative)
    linked = freed = 0
    for relative, status in large_files(target_packages).items():
        source = sources.get((relative, status.st_size))
        if source is None:
            continue
        source_status = source.stat()
        if source_status.st_dev != status.st_dev or source_status.st_ino == status.st_ino:
            continue
        path = target_packages / relative
        if not filecmp.cmp(source, path, shallow=False):
            continue
        temporary = path.with_name(f".{path.name}.link")
        try:
            os.link(source, temporary)
        except OSError as error:  # a filesystem without hard links: every file stays a copy
            print(f"{target}: no hard link to {source} ({error.strerror}): the files stay copies", file=sys.stderr)
            break
        os.replace(temporary, path)
        linked += 1
        freed += status.st_size
    return linked, freed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    target, *others = (Path(arg) for arg in argv)
    linked, freed = link_identical(target, others)
    print(f"{target}: {linked} files linked to identical ones in the other venvs, {freed / 2**30:.2f} GiB freed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
