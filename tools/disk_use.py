"""The disk a command takes while it runs: the growth of the used space on the filesystem of the
current folder, and the size of each watched folder, sampled every few seconds; then the peak of
each. On an otherwise idle machine the growth is the command's (a CI run from a fresh clone:
`python3 tools/disk_use.py --watch /tmp/pytest-of-$USER -- bash .ci/run`).

    python3 tools/disk_use.py [--every S] [--samples TSV] [--watch DIR]... -- COMMAND...

Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

GIB = 2**30


def folder_bytes(folder: Path) -> int:
    """The bytes the files under FOLDER take on disk, each inode counted once; 0 if it is absent."""
    seen, total = set(), 0
    for parent, _, names in os.walk(folder):
        for name in names:
            try:
                status = os.lstat(os.path.join(parent, name))
            except FileNotFoundError:  # removed while walking
                continue
            if (status.st_dev, status.st_ino) not in seen:
                seen.add((status.st_dev, status.st_ino))
                total += status.st_blocks * 512
    return total


def sample(start_used: int, watched: list[Path]) -> list[int]:
    return [shutil.disk_usage(".").used - start_used] + [folder_bytes(folder) for folder in watched]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=15.0, help="seconds between samples")
    parser.add_argument("--samples", type=Path, help="write every sample here, tab-separated")
    parser.add_argument("--watch", type=Path, action="append", default=[], help="a folder whose size to follow")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run (give it after --)")
    columns = ["seconds", "filesystem growth"] + [f"{folder}" for folder in args.watch]
    start, start_used = time.monotonic(), shutil.disk_usage(".").used
    rows = [[0.0] + sample(start_used, args.watch)]
    process = subprocess.Popen(command)
    while process.poll() is None:
        try:
            process.wait(timeout=args.every)
        except subprocess.TimeoutExpired:
            pass
        rows.append([time.monotonic() - start] + sample(start_used, args.watch))
    if args.samples:
        lines = ["\t".join(columns)] + ["\t".join(f"{value:.0f}" for value in row) for row in rows]
        args.samples.write_text("\n".join(lines) + "\n")
    free = shutil.disk_usage(".").free / GIB
    print(f"disk_use: exit {process.returncode} after {rows[-1][0]:.0f} s; {free:.1f} GiB free now", file=sys.stderr)
    for index, name in enumerate(columns[1:], start=1):
        peak = max(rows, key=lambda row: row[index])
        print(
            f"disk_use: {name}: peak {peak[index] / GIB:.2f} GiB at {peak[0]:.0f} s, "
            f"{rows[-1][index] / GIB:.2f} GiB at the end",
            file=sys.stderr,
        )
    return process.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
