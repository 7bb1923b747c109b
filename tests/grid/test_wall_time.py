"""The grid's run time comes from the record the workflow writes as it runs (klrl.grid.wall_time):
summed over the invocations that ran jobs, formatted as the results' blocks print it, a malformed
line named by file and line, and one real Snakemake invocation writing its line."""

import json
from datetime import datetime

import pytest
from workflow_helpers import copy_workflow, snakemake

from klrl.grid.wall_time import record, run_time

LINES = [
    # 1 h 20 min 0 s, 10 jobs
    {"start": "2026-12-03T10:00:00+00:00", "end": "2026-12-03T11:20:00+00:00", "jobs": 10, "cores": 2},
    # a later invocation with nothing it finished: not counted
    {"start": "2026-12-03T12:00:00+00:00", "end": "2026-12-03T12:05:00+00:00", "jobs": 0, "cores": 2},
    # 30 min 3 s, 4 jobs
    {"start": "2026-12-03T13:00:00+00:00", "end": "2026-12-03T13:30:03+00:00", "jobs": 4, "cores": 2},
]


def _write(path, lines):
    path.write_text("".join(json.dumps(line | {"outcome": "success"}) + "\n" for line in lines))
    return path


def test_the_run_time_is_the_total_of_the_invocations_that_ran_jobs(tmp_path):
    path = _write(tmp_path / "wall_times.jsonl", LINES)
    assert run_time(path) == "1 h 50 min 3 s on 2 cores"
    _write(path, [LINES[0], LINES[2] | {"cores": 4}])
    assert run_time(path) == "1 h 50 min 3 s on 2 and 4 cores"
    _write(path, [LINES[2] | {"end": "2026-12-03T13:00:07+00:00"}])
    assert run_time(path) == "7 s on 2 cores"


def test_record_appends_one_line_per_invocation(tmp_path):
    path = tmp_path / "results" / "wall_times.jsonl"
    start = datetime.fromisoformat("2026-12-03T10:00:00+00:00").timestamp()
    record(path, start, start + 65.4, 3, 2, "success")
    record(path, start + 100, start + 160, 1, None, "error")
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {
            "start": "2026-12-03T10:00:00+00:00",
            "end": "2026-12-03T10:01:05+00:00",
            "jobs": 3,
            "cores": 2,
            "outcome": "success",
        },
        {
            "start": "2026-12-03T10:01:40+00:00",
            "end": "2026-12-03T10:02:40+00:00",
            "jobs": 1,
            "cores": None,
            "outcome": "error",
        },
    ]
    assert run_time(path) == "2 min 5 s on 2 cores and a cluster"
    record(path, start, start + 1, 1, 1, "success")
    assert run_time(path) == "2 min 6 s on 1 and 2 cores and a cluster"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not a JSON line (Expecting property name enclosed in double quotes)"),
        (
            '{"start": "2026-12-03T13:00:00+00:00"}',
            "an invocation has exactly the fields start, end, jobs, cores, outcome",
        ),
        (json.dumps(LINES[0] | {"end": "yesterday", "outcome": "success"}), "start and end are ISO 8601 times"),
        (
            json.dumps(LINES[0] | {"jobs": "10", "outcome": "success"}),
            "end before start, or jobs or cores not a whole number",
        ),
    ],
)
def test_a_malformed_line_is_named_by_file_and_line(tmp_path, line, message):
    path = _write(tmp_path / "wall_times.jsonl", LINES[:1])
    path.write_text(path.read_text() + "\n" + line + "\n")
    with pytest.raises(ValueError) as error:
        run_time(path)
    assert str(error.value) == f"{path}:3: {message}"


def test_a_missing_record_or_one_without_jobs_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "wall_times.jsonl"
    with pytest.raises(ValueError) as error:
        run_time(path)
    assert str(error.value) == f"{path}: no record of the grid's wall time (the workflow writes it when a run ends)"
    _write(path, LINES[1:2])
    with pytest.raises(ValueError) as error:
        run_time(path)
    assert str(error.value) == f"{path}: no invocation that ran a job"


@pytest.mark.slow
def test_a_snakemake_invocation_that_runs_a_job_records_its_wall_time(tmp_path):
    folder = copy_workflow(tmp_path)
    target = "results/ci-test/data/arith/manifest.json"
    dry = snakemake(folder, "-n", "--cores", "1", "--configfile", ".test/config/test.yaml", "--", target)
    assert dry.returncode == 0, dry.stderr[-3000:]
    path = folder / "results" / "ci-test" / "wall_times.jsonl"
    assert not path.exists()  # a dry run records nothing
    done = snakemake(folder, "--cores", "1", "--configfile", ".test/config/test.yaml", "--", target)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [json.loads(text) for text in path.read_text().splitlines()]
    assert (line["jobs"], line["cores"], line["outcome"]) == (1, 1, "success")
    assert run_time(path).endswith(" s on 1 core")
