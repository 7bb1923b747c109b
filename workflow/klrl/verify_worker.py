r"""math-verify in a subprocess: equivalence checks that can never hang the caller.

math-verify's own timeout uses `signal.alarm`, which works only on the main
thread, and our callers may run rewards in worker threads. So each process keeps one worker
subprocess (`python -m klrl.verify_worker FD`, started on first use, limited to 2 GiB of address
space) that runs math-verify with its timeouts off and caches its verdicts. A batch's
symbolic checks are sent to it at once and answered one by one; an item not answered within
`timeout` seconds (measured from the previous answer) is False, and the worker is killed
and a new one started at once, which warms up in the background (about 3 s, not counted in
`timeout`). Should the parent die first, the worker ends itself: at end of file on its
connection when idle, by an interval timer with the default SIGALRM action (fatal even
inside C code that holds the GIL, such as a huge integer power) `timeout` + 1 s into an
item. Calls from several threads share the worker, one batch at a time; a forked child starts
its own. A subprocess, not multiprocessing's spawn, so that the caller's `__main__` is never
re-imported. """

from __future__ import annotations

import atexit
import functools
import logging
import os
import resource
import signal
import subprocess
import sys
import threading
from multiprocessing import Pipe
from multiprocessing.connection import Connection

WORKER_START_TIMEOUT = 120.0
WORKER_MEMORY_BYTES = 2 << 30

# Cold sympy takes about a second for its first polynomial: the worker runs these first.
_WARM_UP = (
    ("(x+1)^2", "x^2+2x+1"),
    ("2\\sqrt{2}", "\\sqrt{8}"),
    ("[1,2)", "[1, 2)"),
    ("\\{1,2\\}", "\\{2,1\\}"),
    ("\\log_2 8", "3"),
)


class _MathWorker:
    """This process's math-verify subprocess: started on first use, replaced after a timeout."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._connection: Connection | None = None
        self._ready = False

    def check(self, pairs: list[tuple[str, str]], timeout: float) -> list[bool]:
        """math-verify's verdict on each (reference, answer) pair; False if not given in `timeout` s."""
        verdicts: list[bool] = []
        with self._lock:
            while len(verdicts) < len(pairs):
                connection = self._ready_connection()
                connection.send((timeout, pairs[len(verdicts) :]))
                while len(verdicts) < len(pairs):
                    try:
                        if not connection.poll(timeout):
                            raise TimeoutError
                        verdicts.append(bool(connection.recv()))
                    except (TimeoutError, EOFError, OSError):
                        self.stop()
                        self._spawn()  # the replacement warms up while the caller goes on
                        verdicts.append(False)
                        break
        return verdicts

    def _ready_connection(self) -> Connection:
        """The connection to a warmed-up worker, starting one if there is none."""
        if self._connection is None:
            self._spawn()
        if not self._ready:
            try:
                self._ready = self._connection.poll(WORKER_START_TIMEOUT) and self._connection.recv() == "ready"
            except (EOFError, OSError):
                pass
        if not self._ready:
            self.stop()
            raise RuntimeError(f"rewards: the math-verify worker failed to start (waited {WORKER_START_TIMEOUT} s)")
        return self._connection

    def _spawn(self) -> None:
        """Start a worker process; it says "ready" once warmed up."""
        ours, theirs = Pipe()
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "klrl.verify_worker", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path},
        )
        theirs.close()
        self._connection = ours

    def stop(self) -> None:
        """Kill the worker, if any; the next check starts a new one."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._connection.close()
        self._process = self._connection = None
        self._ready = False


def _new_worker() -> None:
    """Give this process a worker of its own (at import, and in a forked child)."""
    global _WORKER
    _WORKER = _MathWorker()


_new_worker()
os.register_at_fork(after_in_child=_new_worker)
atexit.register(lambda: _WORKER.stop())


@functools.lru_cache(maxsize=1 << 16)
def _equivalent(reference: str, answer: str) -> bool:
    """math-verify's verdict, in the worker, with its signal-based timeouts off."""
    from math_verify import parse, verify

    try:
        gold = parse(f"\\boxed{{{reference}}}", parsing_timeout=None)
        return verify(gold, parse(f"\\boxed{{{answer}}}", parsing_timeout=None), timeout_seconds=None)
    except Exception:
        return False


def _serve(fd: int) -> None:
    """The worker's loop: answer each (timeout, pairs) batch received on `fd`, a verdict at a time."""
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which then kills us
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the kernel ends us, even inside C code
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    connection = Connection(fd)
    for reference, answer in _WARM_UP:
        _equivalent(reference, answer)
    try:
        connection.send("ready")
        while True:
            timeout, pairs = connection.recv()
            for reference, answer in pairs:
                signal.setitimer(signal.ITIMER_REAL, timeout + 1.0)  # in case the parent has died
                verdict = _equivalent(reference, answer)
                signal.setitimer(signal.ITIMER_REAL, 0)
                connection.send(verdict)
    except (EOFError, OSError):
        return  # the parent has closed the connection




def check_equivalent(pairs: list[tuple[str, str]], timeout: float) -> list[bool]:
    """math-verify's verdict on each (reference, answer) pair; False where it took over `timeout` s."""
    return _WORKER.check(pairs, timeout) if pairs else []


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
