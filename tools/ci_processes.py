"""Where a CI run's CPU time went, process by process, from Linux's BSD process accounting: every
process that ended while accounting was on, with its CPU time (user + system), by command name,
and the processes by how much CPU each took (most of a job's or a command's is its imports).

    touch acct && accton acct && CI=true bash .ci/run; accton off
    python3 tools/ci_processes.py acct --wall 2000 --cores 2

`accton` and `dump-acct` are Debian's `acct` package (root only). A process's CPU is its own, not
its children's; one still running when accounting stops is not in the file. The command name is
that of the process's last thread to end: a Python process that imported pyarrow (pandas does)
is often `jemalloc_bg_thd`, one of torch.distributed `pt_elastic` or `pt_gloo_runloop`.
"""

from __future__ import annotations

import argparse
import subprocess
from collections import defaultdict

# The CPU seconds of a process's band (upper bounds); a Python that imports torch and transformers
# takes 3-6 s of CPU before its first line of work (benchmarks/HISTORY.md, bytecode at first import).
BANDS = (1.0, 3.0, 6.0, 12.0, 60.0, float("inf"))


def read_processes(path: str) -> list[dict]:
    """One row per ended process in the accounting file: its command name and CPU seconds."""
    return parse_dump(subprocess.run(["dump-acct", path], capture_output=True, text=True, check=True).stdout)


def parse_dump(dumped: str) -> list[dict]:
    """dump-acct's lines (`comm|v3|utime|stime|etime|uid|gid|mem|io|pid|ppid|...`, times in 1/100 s) as rows."""
    rows = []
    for line in dumped.splitlines():
        fields = [field.strip() for field in line.split("|")]
        try:
            user, system = float(fields[2]), float(fields[3])
        except (IndexError, ValueError):
            raise ValueError(f"not a line of dump-acct's: {line[:80]!r}") from None
        rows.append({"command": fields[0], "cpu": (user + system) / 100})
    return rows


def by_command(rows: list[dict]) -> list[tuple[str, int, float]]:
    """(command, processes, CPU seconds), most CPU first."""
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for row in rows:
        totals[row["command"]][0] += 1
        totals[row["command"]][1] += row["cpu"]
    return sorted(((name, count, cpu) for name, (count, cpu) in totals.items()), key=lambda item: -item[2])


def cpu_bands(rows: list[dict]) -> list[tuple[str, int, float]]:
    """The processes by their CPU seconds: (band, processes, CPU seconds)."""
    bands = []
    lower = 0.0
    for upper in BANDS:
        inside = [row["cpu"] for row in rows if lower <= row["cpu"] < upper]
        bands.append((f"{lower:g}-{upper:g} s", len(inside), sum(inside)))
        lower = upper
    return bands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("acct", help="the process accounting file accton wrote")
    parser.add_argument("--wall", type=float, help="the run's wall time in seconds: the share of the cores used")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--top", type=int, default=15, help="commands listed")
    args = parser.parse_args()
    rows = read_processes(args.acct)
    total = sum(row["cpu"] for row in rows)
    print(f"{len(rows)} processes, {total:.0f} s of CPU", end="")
    if args.wall:
        print(f" in {args.wall:.0f} s on {args.cores} cores: {total / (args.wall * args.cores):.0%} of them busy")
    else:
        print()
    print("\n| command | processes | CPU s | share |\n|---|---|---|---|")
    for name, count, cpu in by_command(rows)[: args.top]:
        print(f"| {name} | {count} | {cpu:.0f} | {cpu / total:.1%} |")
    print("\n| processes by CPU each | processes | CPU s | share |\n|---|---|---|---|")
    for band, count, cpu in cpu_bands(rows):
        print(f"| {band} | {count} | {cpu:.0f} | {cpu / total:.1%} |")


if __name__ == "__main__":
    main()
