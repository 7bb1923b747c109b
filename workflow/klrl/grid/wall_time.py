"""The grid's run time, recorded by the workflow as it runs rather than typed.

When a Snakemake invocation of the workflow that had jobs to run ends, in success or in error,
its onsuccess/onerror handler (workflow/rules/tracking.smk) appends one line to the experiment's
`wall_times.jsonl` (klrl.core.paths.Layout.wall_times):

    {"start": "2026-12-03T10:02:11+00:00", "end": "2026-12-03T11:37:34+00:00", "jobs": 83, "cores": 2, "outcome": "success"}

`start` is when the main Snakemake process read the workflow, `jobs` the jobs it ran to the end
(a dry run, or an invocation with nothing to do, records nothing). `run_time` gives the run's
wall time from those lines, as `klrl readme-results` prints it in the blocks of docs/results.md:
the total of the invocations that ran at least one job, and the cores they had (none recorded:
jobs submitted to a cluster). An invocation killed outright (SIGKILL, a lost node) records
nothing, so its time is not counted.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

FIELDS = ("start", "end", "jobs", "cores", "outcome")


def record(path: Path, start: float, end: float, jobs: int, cores: int | None, outcome: str) -> None:
    """Append one invocation (start and end as POSIX times) to the record at `path`."""

    def stamp(seconds: float) -> str:
        return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")

    line = {"start": stamp(start), "end": stamp(end), "jobs": jobs, "cores": cores, "outcome": outcome}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as file:
        file.write(json.dumps(line) + "\n")


def _invocation(path: Path, number: int, text: str) -> tuple[float, int, int | None]:
    """One line's wall seconds, jobs and cores; a ValueError naming `path:number` if malformed."""
    where = f"{path}:{number}"
    try:
        line = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not a JSON line ({error.msg})") from None
    if not isinstance(line, dict) or set(line) != set(FIELDS):
        raise ValueError(f"{where}: an invocation has exactly the fields {', '.join(FIELDS)}")
    try:
        seconds = (datetime.fromisoformat(line["end"]) - datetime.fromisoformat(line["start"])).total_seconds()
    except (TypeError, ValueError):
        raise ValueError(f"{where}: start and end are ISO 8601 times") from None
    jobs, cores = line["jobs"], line["cores"]
    if seconds < 0 or not isinstance(jobs, int) or jobs < 0 or not (cores is None or isinstance(cores, int)):
        raise ValueError(f"{where}: end before start, or jobs or cores not a whole number")
    return seconds, jobs, cores


def duration(seconds: float) -> str:
    """`seconds` in whole hours, minutes and seconds.

    >>> duration(6603.4), duration(125), duration(7)
    ('1 h 50 min 3 s', '2 min 5 s', '7 s')
    """
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    parts = [f"{hours} h"] if hours else []
    parts += [f"{minute} min"] if hours or minute else []
    return " ".join([*parts, f"{second} s"])


def run_time(path: Path) -> str:
    """The run's wall time from its record, e.g. '1 h 50 min 3 s on 2 cores'."""
    if not path.is_file():
        raise ValueError(f"{path}: no record of the grid's wall time (the workflow writes it when a run ends)")
    lines = [(number, text) for number, text in enumerate(path.read_text().splitlines(), 1) if text.strip()]
    invocations = [_invocation(path, number, text) for number, text in lines]
    counted = [(seconds, cores) for seconds, jobs, cores in invocations if jobs > 0]
    if not counted:
        raise ValueError(f"{path}: no invocation that ran a job")
    counts = sorted({cores for _, cores in counted if cores is not None})
    where = [f"{' and '.join(map(str, counts))} {'core' if counts == [1] else 'cores'}"] if counts else []
    where += ["a cluster"] if any(cores is None for _, cores in counted) else []  # a remote executor's jobs
    return f"{duration(sum(seconds for seconds, _ in counted))} on {' and '.join(where)}"
