"""CPU time of test processes whose idle OpenMP threads spin (libgomp's default) against threads
that sleep (OMP_WAIT_POLICY=PASSIVE, as `make test` sets it), with more processes than cores.

`make test` runs its two pytest workers, the vLLM suite beside them and their subprocesses on two
cores: more OpenMP threads than cores. A torch thread that finishes its share of a parallel region
spins for the next one before it sleeps (libgomp spins about 300,000 times when a process alone
has no more threads than cores), taking a core that another process waits for. The wait policy
decides only how an idle thread waits; the number of threads, and so each reduction's order, is
the same, so no result changes.

Each round runs the same test file (two workers each) twice at once, once with each policy, the
two policies in turn (A B A B ...), and prints each run's wall and CPU seconds (user + system of
the whole process tree) with the CPU model and load:

    .venv/bin/python benchmarks/omp_wait.py [--rounds 1] [--tests tests/training/test_step.py]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from common import children_cpu, machine, markdown_table, median

ROOT = Path(__file__).resolve().parents[1]
COPIES = 2  # processes beside each other, as the main suite and the vLLM suite are
POLICIES = {"spin (default)": None, "PASSIVE": "PASSIVE"}


def run_copies(tests: str, policy: str | None) -> tuple[float, float]:
    """Wall and CPU seconds of COPIES pytest runs of `tests` at once, under the OpenMP wait `policy`."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", tests]
    cpu, start = children_cpu(), time.perf_counter()
    runs = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) for _ in range(COPIES)]
    outputs = [run.communicate()[0] for run in runs]
    wall = time.perf_counter() - start
    failed = [output[-2000:] for run, output in zip(runs, outputs) if run.returncode]
    if failed:
        raise SystemExit(f"{tests} failed under OMP_WAIT_POLICY={policy}:\n{failed[0]}")
    return wall, children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)  # a spinning round takes minutes
    parser.add_argument("--tests", default="tests/training/test_step.py")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"{COPIES} copies of `pytest -n 2 {args.tests}` at once, {args.rounds} rounds, policies in turn")
    figures = {name: [] for name in POLICIES}
    for _ in range(args.rounds):
        for name, policy in POLICIES.items():
            figures[name].append(run_copies(args.tests, policy))
            wall, cpu = figures[name][-1]
            print(f"  {name}: {wall:.0f} s wall, {cpu:.0f} CPU s", flush=True)
    rows = [
        [name, median([wall for wall, _ in runs]), median([cpu for _, cpu in runs])] for name, runs in figures.items()
    ]
    print(markdown_table(["idle OpenMP threads", "median wall s", "median CPU s"], rows))
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    main()
