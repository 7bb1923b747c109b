r"""The grading service: math-verify in worker processes, bounded per item and per batch.

math-verify's own timeout uses `signal.alarm`, which works only on the main thread (our callers
may grade in worker threads), and a hostile answer (`9^{9^{9^9}}`, `(10^{10})!`) can keep sympy
busy for hours inside C code. So each process that grades keeps:
  - a *template* subprocess (`python -m klrl.grading.verify_worker FD`), started on first use, that
    imports and warms up math-verify once (about 3 s) and then only forks workers on request:
    a new worker is ready in milliseconds, already warm;
  - WORKERS persistent workers, forked from it, that answer one (reference, answer) at a time;
  - a cache of verdicts by content (reference, answer), hostile ones included: an answer that
    timed out once scores 0 at once the next time, whoever sends it.
A batch's items are spread over the workers. An item not answered within `timeout` seconds is
False and only the worker that holds it is killed (and replaced by a fresh fork); the others go
on. A worker that dies under an item (its memory limit, or a kill from outside) is replaced and
the item tried once more; dying twice makes it False. A batch also has a total `deadline`: when it passes, answers already in the workers' pipes
are read, and every item still not graded is False and
counted (`grading_counts`, logged by the trainer as `grading/deadline_zeroed`), so no batch of
any size takes longer than `deadline` + a kill. Should the parent die, the template ends at end
of file on its connection, a worker at end of file when idle or by an interval timer with the
default SIGALRM action (fatal even inside C code holding the GIL) `timeout` + 1 s into an item.
Every process is limited to WORKER_MEMORY_BYTES of address space. Calls from several threads
share the service, one batch at a time; a forked child starts its own. A subprocess, not
multiprocessing's spawn, so that the caller's `__main__` is never re-imported.
"""

from __future__ import annotations

import atexit
import functools
import logging
import math
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict, deque
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle, send_handle

WORKER_START_TIMEOUT = 120.0
WORKER_MEMORY_BYTES = 2 << 30
WORKERS = max(1, min(4, len(os.sched_getaffinity(0))))
BATCH_DEADLINE = 60.0  # seconds for a whole batch, whatever its size
CACHE_SIZE = 1 << 16

# Cold sympy takes about a second for its first polynomial: the template runs these first.
_WARM_UP = (
    ("(x+1)^2", "x^2+2x+1"),
    ("2\\sqrt{2}", "\\sqrt{8}"),
    ("[1,2)", "[1, 2)"),
    ("\\{1,2\\}", "\\{2,1\\}"),
    ("\\log_2 8", "3"),
)


class _Worker:
    """One forked worker: its pid (a child of the template) and our end of its connection."""

    def __init__(self, pid: int, connection: Connection) -> None:
        self.pid, self.connection = pid, connection

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.connection.close()


class _GradingService:
    """This process's template, workers and verdict cache."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._template: subprocess.Popen | None = None
        self._control: Connection | None = None
        self._workers: list[_Worker] = []
        self._cache: OrderedDict[tuple[str, str], bool] = OrderedDict()
        self._counts = {"grading/timeouts": 0, "grading/deadline_zeroed": 0, "grading/cache_hits": 0}

    def check(self, pairs: list[tuple[str, str]], timeout: float, deadline: float | None) -> list[bool]:
        """math-verify's verdict on each (reference, answer) pair: False where it took over
        `timeout` s, or was not reached before `deadline` s (None: no batch deadline)."""
        end = time.monotonic() + (math.inf if deadline is None else deadline)
        with self._lock:
            verdicts: list[bool | None] = [None] * len(pairs)
            waiting: dict[tuple[str, str], list[int]] = {}
            for index, pair in enumerate(pairs):
                if pair in self._cache:
                    self._cache.move_to_end(pair)
                    verdicts[index] = self._cache[pair]
                    self._counts["grading/cache_hits"] += 1
                else:
                    waiting.setdefault(pair, []).append(index)
            queue = deque(waiting)
            if queue:
                self._start_workers()
            busy: dict[int, tuple[tuple[str, str], float]] = {}  # worker slot → (pair, sent at)
            died: set[tuple[str, str]] = set()  # pairs whose worker died under them once
            while (queue or busy) and time.monotonic() < end:
                for slot in range(len(self._workers)):
                    if slot not in busy and queue:
                        pair = queue.popleft()
                        try:
                            self._workers[slot].connection.send((timeout, *pair))
                        except OSError:  # the worker died while idle (killed from outside)
                            self._replace(slot)
                            self._workers[slot].connection.send((timeout, *pair))
                        busy[slot] = (pair, time.monotonic())
                wake = min([end] + [sent + timeout for _, sent in busy.values()])
                answered = wait([self._workers[slot].connection for slot in busy], max(0.0, wake - time.monotonic()))
                for slot in [slot for slot in busy if self._workers[slot].connection in answered]:
                    pair, _ = busy.pop(slot)
                    try:
                        verdict = bool(self._workers[slot].connection.recv())
                    except (EOFError, OSError):  # the worker died: killed from outside, or by this answer
                        self._replace(slot)
                        if pair not in died:  # once more on a fresh worker; twice is the answer's doing
                            died.add(pair)
                            queue.appendleft(pair)
                            continue
                        verdict = False
                    self._settle(pair, verdict, waiting, verdicts)
                now = time.monotonic()
                for slot, (pair, sent) in list(busy.items()):
                    # an answer (or end of file) that came while we were replacing a worker is
                    # read on the next round, not counted against its item
                    if now - sent >= timeout and not self._workers[slot].connection.poll():
                        del busy[slot]
                        self._replace(slot)
                        self._counts["grading/timeouts"] += 1
                        self._settle(pair, False, waiting, verdicts)
            for slot, (pair, _) in list(busy.items()):  # the deadline passed with these in flight
                verdict = self._waiting_answer(slot)
                if verdict is None:
                    self._replace(slot)
                else:  # answered before the deadline, not yet read: it counts
                    del busy[slot]
                    self._settle(pair, verdict, waiting, verdicts)
            unreached = [index for pair in [*queue, *(pair for pair, _ in busy.values())] for index in waiting[pair]]
            for index in unreached:
                verdicts[index] = False
            self._counts["grading/deadline_zeroed"] += len(unreached)
        return [bool(verdict) for verdict in verdicts]

    def _waiting_answer(self, slot: int) -> bool | None:
        """The verdict already in a worker's pipe; None when there is none (or it died)."""
        connection = self._workers[slot].connection
        try:
            return bool(connection.recv()) if connection.poll() else None
        except (EOFError, OSError):
            return None

    def _settle(self, pair, verdict: bool, waiting: dict, verdicts: list) -> None:
        """Record a verdict for every item of the batch with this content, and in the cache."""
        for index in waiting[pair]:
            verdicts[index] = verdict
        self._cache[pair] = verdict
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    def counts(self) -> dict[str, int]:
        """Timeouts, deadline-zeroed items and cache hits since the last call."""
        with self._lock:
            counts, self._counts = self._counts, dict.fromkeys(self._counts, 0)
        return counts

    # ------------------------------------------------------------ processes
    def _start_workers(self) -> None:
        while len(self._workers) < WORKERS:
            self._workers.append(self._fork())

    def _replace(self, slot: int) -> None:
        """Kill one worker (stuck or dead) and put a fresh fork in its slot."""
        self._workers[slot].kill()
        self._workers[slot] = self._fork()

    def _fork(self) -> _Worker:
        """A new warm worker, forked by the template (started first if need be, again if it died)."""
        try:
            return self._fork_from(self._ready_template())
        except (EOFError, OSError):
            self._stop_template()
        try:
            return self._fork_from(self._ready_template())
        except (EOFError, OSError):
            self._stop_template()
            raise RuntimeError("rewards: the math-verify template process died twice in a row") from None

    def _fork_from(self, control: Connection) -> _Worker:
        ours, theirs = Pipe()
        try:
            control.send("fork")
            send_handle(control, theirs.fileno(), self._template.pid)
            return _Worker(control.recv(), ours)
        finally:
            theirs.close()

    def _ready_template(self) -> Connection:
        """The connection to a warmed-up template process, starting one if there is none."""
        if self._control is not None:
            return self._control
        ours, theirs = Pipe()
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
        self._template = subprocess.Popen(
            [sys.executable, "-m", "klrl.grading.verify_worker", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path},
        )
        theirs.close()
        self._control = ours
        try:
            ready = ours.poll(WORKER_START_TIMEOUT) and ours.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self._stop_template()
            raise RuntimeError(f"rewards: the math-verify process failed to start (waited {WORKER_START_TIMEOUT} s)")
        return ours

    def stop(self) -> None:
        """Kill the workers and the template; the next check starts new ones."""
        for worker in self._workers:
            worker.kill()
        self._workers = []
        self._stop_template()

    def _stop_template(self) -> None:
        if self._template is not None:
            self._template.kill()
            self._template.wait()
            self._control.close()
        self._template = self._control = None


def _new_service() -> None:
    """Give this process a grading service of its own (at import, and in a forked child)."""
    global _SERVICE
    _SERVICE = _GradingService()


_new_service()
os.register_at_fork(after_in_child=_new_service)
atexit.register(lambda: _SERVICE.stop())


@functools.lru_cache(maxsize=1 << 12)
def _equivalent(reference: str, answer: str) -> bool:
    """math-verify's verdict, in a worker, with its signal-based timeouts off."""
    from math_verify import parse, verify

    try:
        gold = parse(f"\\boxed{{{reference}}}", parsing_timeout=None)
        return verify(gold, parse(f"\\boxed{{{answer}}}", parsing_timeout=None), timeout_seconds=None)
    except Exception:
        return False


def _serve(connection: Connection) -> None:
    """A worker's loop: answer each (timeout, reference, answer) received, until end of file."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the kernel ends us, even inside C code
    try:
        while True:
            timeout, reference, answer = connection.recv()
            signal.setitimer(signal.ITIMER_REAL, timeout + 1.0)  # in case the parent has died
            verdict = _equivalent(reference, answer)
            signal.setitimer(signal.ITIMER_REAL, 0)
            connection.send(verdict)
    except (EOFError, OSError):
        return  # the parent has closed the connection


def _template(fd: int) -> None:
    """The template's loop: warm up, then fork a worker on each request received on `fd`."""
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which then kills us
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed workers are reaped by the kernel
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    control = Connection(fd)
    for reference, answer in _WARM_UP:
        _equivalent(reference, answer)
    try:
        control.send("ready")
        while control.recv() == "fork":
            handle = recv_handle(control)
            pid = os.fork()
            if pid == 0:
                control.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _serve(Connection(handle))
                os._exit(0)
            os.close(handle)
            control.send(pid)
    except (EOFError, OSError):
        return  # the parent has closed the connection


def check_equivalent(
    pairs: list[tuple[str, str]], timeout: float, deadline: float | None = BATCH_DEADLINE
) -> list[bool]:
    """math-verify's verdict on each (reference, answer) pair; False where it took over `timeout`
    s, or was not reached within the batch's `deadline` s."""
    return _SERVICE.check(pairs, timeout, deadline) if pairs else []


def grading_counts() -> dict[str, int]:
    """This process's grading timeouts, deadline-zeroed items and cache hits since the last call."""
    return _SERVICE.counts()


if __name__ == "__main__":
    _template(int(sys.argv[1]))
