"""The grading processes (klrl.grading.verify_worker) killed or stopped from outside: replaced, and
every answer that arrived counted, past an item's timeout or the batch's deadline."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from klrl.grading.rewards import math_reward
from klrl.grading.verify_worker import WORKERS, grading_counts

KILLED_GRADERS = (
    3  # the template and every worker at once; workers under their items, the template stopped; past the deadline
)


def _children(pid: int) -> list[int]:
    """The pids of a process's children (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _grading_templates() -> list[int]:
    """The pids of this process's math-verify template processes (klrl.grading.verify_worker)."""
    return [
        pid
        for pid in _children(os.getpid())
        if b"klrl.grading.verify_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


@pytest.mark.slow
def test_killed_grading_processes_are_replaced():
    assert math_reward([r"\boxed{\sqrt{20}}"], [r"2\sqrt{5}"]) == [1.0]  # starts the template and its workers
    templates = _grading_templates()
    workers = [pid for template in templates for pid in _children(template)]
    assert len(templates) == 1 and workers
    for pid in workers + templates:
        os.kill(pid, signal.SIGKILL)
    assert math_reward([r"\boxed{\sqrt{45}}", r"\boxed{7}"], [r"3\sqrt{5}", r"\sqrt{49}"]) == [1.0, 1.0]


def _grade_past_a_stopped_template(prime: int, kills: int, stall: float, **limits) -> list[float]:
    """One item per worker, each needing sympy (√(4p) = 2√p, √(9p) = 3√p, ...; a prime no other
    test uses, so that no verdict is cached), sent to stopped
    workers; 0.3 s in, `kills` of them are killed under their items and the others resumed,
    while the template, which the service then waits on for replacements, stays stopped
    `stall` s more. Counted from the start (grading_counts)."""
    assert math_reward([r"\boxed{\sqrt{99}}"], [r"3\sqrt{11}"]) == [1.0]  # starts the processes
    (template,) = _grading_templates()
    workers = _children(template)
    dying, answering = workers[:kills], workers[kills:]
    for pid in [template, *workers]:
        os.kill(pid, signal.SIGSTOP)

    def later():  # the batch is in the stopped workers' pipes by then
        time.sleep(0.3)
        for pid in dying:
            os.kill(pid, signal.SIGKILL)
        for pid in answering:
            os.kill(pid, signal.SIGCONT)
        time.sleep(stall)
        os.kill(template, signal.SIGCONT)

    grading_counts()
    resumer = threading.Thread(target=later)
    resumer.start()
    try:
        ks = range(2, 2 + WORKERS)
        return math_reward(
            [rf"\boxed{{\sqrt{{{prime * k * k}}}}}" for k in ks], [rf"{k}\sqrt{{{prime}}}" for k in ks], **limits
        )
    finally:
        resumer.join()


def test_an_answer_that_comes_while_a_dead_worker_is_replaced_counts():
    """One grading worker answers while the service waits on the template for a replacement of
    another, which died under its item: the answer counts, though its item's timeout has passed
    by the time the service looks (it used to be zeroed, which flaked under load)."""
    assert (
        _grade_past_a_stopped_template(7, WORKERS - 1, stall=1.2, timeout=1.0) == [1.0] * WORKERS
    )  # past the 1 s timeout
    assert grading_counts()["grading/timeouts"] == 0


def test_answers_in_the_pipe_at_the_batch_deadline_are_read_not_zeroed():
    """The batch deadline passes while the service waits on the stopped template for a
    replacement of a worker that died under its item; the other workers have answered by then:
    their answers count, and only the dead worker's item (never graded) is zeroed."""
    rewards = _grade_past_a_stopped_template(13, 1, stall=2.7, timeout=10.0, deadline=1.0)  # past the 1 s deadline
    assert sorted(rewards) == [0.0] + [1.0] * (WORKERS - 1)
    assert grading_counts()["grading/deadline_zeroed"] == 1
