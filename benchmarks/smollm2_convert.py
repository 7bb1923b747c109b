"""CPU seconds of SmolLM2-135M-Instruct's conversion from its GGUF (klrl.models.smollm2) with
gguf-py's tensor name map built once, as the conversion does, against built once per submodule,
as transformers' loader asks for it. Each conversion is a fresh process into a fresh folder, the
two in turn (A, B, A, B ...):

    .venv/bin/python benchmarks/smollm2_convert.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile

from common import children_cpu, machine, markdown_table, median

CONVERT = """
import contextlib, sys
from pathlib import Path
from klrl.models import smollm2
if sys.argv[2] == "per submodule":
    smollm2._one_tensor_name_map = contextlib.nullcontext
smollm2.convert_smollm2(Path(sys.argv[1]) / "model")
"""
MODES = ("once", "per submodule")


def convert_cpu(mode: str) -> float:
    """CPU seconds (user + system) of one conversion in a fresh process."""
    before = children_cpu()
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-c", CONVERT, out, mode], check=True, capture_output=True)
    return children_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)  # a round is two conversions: about 30 s
    args = parser.parse_args()
    print(f"machine: {machine()}")
    figures = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            figures[mode].append(convert_cpu(mode))
            print(f"  tensor name map built {mode}: {figures[mode][-1]:.1f} CPU s", flush=True)
    rows = [[mode, median(values), min(values), max(values)] for mode, values in figures.items()]
    print(markdown_table(["tensor name map built", "median CPU s", "min", "max"], rows))
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    main()
