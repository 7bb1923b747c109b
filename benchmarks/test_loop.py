"""Wall time of the quick test loop, `make test-fast`: every unit and integration test without the
slow ones (end-to-end grids, torchrun, kill -9 faults), the SLURM cluster and the vLLM venv.

Runs `make test-fast` itself in this checkout (so its markers and workers are the Makefile's),
and prints the wall time, the number of tests and the verdict against the 4-minute target.

    .venv/bin/python benchmarks/test_loop.py
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from common import machine, verdict

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ("make", "--no-print-directory", "test-fast")
TARGET_S = 240.0


def main() -> None:
    print(f"machine: {machine()}")
    start = time.perf_counter()
    out = subprocess.run(COMMAND, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    summary = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-2000:]
    print(f"{' '.join(COMMAND)}: {wall:.0f} s wall, {summary}")
    if out.returncode:
        raise SystemExit(f"the quick test loop failed:\n{out.stdout[-3000:]}")
    passed = re.search(r"(\d+) passed", summary)
    verdict(
        f"quick test loop (make test-fast) ≤ {TARGET_S / 60:.0f} min",
        f"{wall:.0f} s, {passed.group(1) if passed else '?'} tests",
        wall <= TARGET_S,
    )


if __name__ == "__main__":
    main()
