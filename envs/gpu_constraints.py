"""The pins of the GPU install (`make gpu-env`): requirements/constraints.txt with the changes
requirements/gpu.txt lists: each `name==version` replaces that package's pin (or adds it), each
`!name` leaves the package out.

    python envs/gpu_constraints.py              # the merged constraints, to stdout
    python envs/gpu_constraints.py --pins       # gpu.txt's pins, one argument each
    python envs/gpu_constraints.py --left-out   # the packages it leaves out
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text.lower())


def _pin(line: str) -> tuple[str, str] | None:
    """(name, `name==version`) of a pin line; None for others."""
    match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line.split("#")[0].strip())
    return (_name(match[1]), f"{match[1]}=={match[2]}") if match else None


def changes(gpu: str) -> tuple[list[str], list[str]]:
    """gpu.txt's pins and the names it leaves out."""
    lines = [line.split("#")[0].strip() for line in gpu.splitlines()]
    return [pin[1] for line in lines if (pin := _pin(line))], [_name(line[1:]) for line in lines if line[:1] == "!"]


def merged(constraints: str, gpu: str) -> str:
    """`constraints`' pins less those `gpu` changes or leaves out, then `gpu`'s pins."""
    pins, left_out = changes(gpu)
    moved = {_pin(pin)[0] for pin in pins} | set(left_out)
    kept = [line for line in constraints.splitlines() if not (_pin(line) and _pin(line)[0] in moved)]
    return "\n".join(kept + pins) + "\n"


if __name__ == "__main__":
    gpu = (ROOT / "requirements" / "gpu.txt").read_text()
    if sys.argv[1:] == ["--pins"]:
        print(" ".join(changes(gpu)[0]))
    elif sys.argv[1:] == ["--left-out"]:
        print(" ".join(changes(gpu)[1]))
    else:
        sys.stdout.write(merged((ROOT / "requirements" / "constraints.txt").read_text(), gpu))
