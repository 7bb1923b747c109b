"""The suite's tests by CPU time, beside pytest's `--durations` (wall time): `make test` shares
two cores among several suites, so a test's wall time counts what ran beside it, and its CPU
time is what it costs. Each phase's (setup, call, teardown) CPU is that of the process running
the test and of the children it waited for (getrusage's RUSAGE_SELF and RUSAGE_CHILDREN: a
Snakemake run's jobs, a torchrun's processes), carried on the phase's report to pytest-xdist's
controller; with `--durations N`, the terminal summary lists the N costliest tests and the total.
With KLRL_TEST_TIMELINE=FILE the controller also appends each phase's suite (its venv), worker,
start, stop and CPU to FILE as JSON lines: when each worker ran what (benchmarks/CI.md reads one
of `make test`, whose suites all append to the one file)."""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

import pytest

CPU_KEY = "cpu_s"  # the report attribute holding a phase's CPU seconds
_STARTED = pytest.StashKey[float]()


def cpu_seconds() -> float:
    """User and system CPU of this process and of its waited-for children, in seconds."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_STARTED] = cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    now = cpu_seconds()
    setattr(outcome.get_result(), CPU_KEY, round(now - item.stash.get(_STARTED, now), 3))
    item.stash[_STARTED] = now


class CpuTable:
    """Each test's CPU, summed over its phases' reports (on the controller under pytest-xdist)."""

    def __init__(self, timeline: str | None) -> None:
        self.by_test: dict[str, float] = {}
        self.timeline = timeline

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        cpu = getattr(report, CPU_KEY, 0.0)
        self.by_test[report.nodeid] = self.by_test.get(report.nodeid, 0.0) + cpu
        if self.timeline:
            worker = getattr(getattr(report, "node", None), "gateway", None)  # pytest-xdist's, else none
            phase = {"suite": Path(sys.prefix).name, "test": report.nodeid, "phase": report.when}
            phase["worker"] = worker.id if worker else "main"
            with open(self.timeline, "a") as timeline:
                timeline.write(json.dumps(phase | {"start": report.start, "stop": report.stop, CPU_KEY: cpu}) + "\n")

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter, config: pytest.Config) -> None:
        count = config.option.durations
        if count is None or not self.by_test:
            return
        ranked = sorted(self.by_test.items(), key=lambda pair: -pair[1])
        total = sum(self.by_test.values())
        terminalreporter.write_sep("=", f"slowest {count} tests by CPU (this process and its waited-for children)")
        for nodeid, seconds in ranked[: count or len(ranked)]:
            terminalreporter.write_line(f"{seconds:9.1f}s cpu  {nodeid}")
        terminalreporter.write_line(f"{total:9.1f}s cpu  in all, {len(ranked)} tests")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # not one of pytest-xdist's workers: the process that reports
        config.pluginmanager.register(CpuTable(os.environ.get("KLRL_TEST_TIMELINE")), "cpu_table")
