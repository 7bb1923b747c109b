"""Shared pieces of the benchmarks: a randomly initialised tiny model, task data, the machine, medians.

No benchmark needs the pretrained tiny base (minutes to build): speed does not depend on the
weights, so each builds the same architecture with random weights in a second.
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import time
from pathlib import Path

import torch

from klrl.models.tiny_settings import TinyConfig
from klrl.models.tiny import build_model, build_tokenizer
from klrl.tasks.data import prepare

ROOT = Path(__file__).resolve().parents[1]

# The default tiny architecture (klrl.models.tiny) and a larger one, as in docs/performance.md.
SIZES = {
    "1M": {"hidden": 128, "layers": 4, "heads": 2, "intermediate": 512},
    "6M": {"hidden": 256, "layers": 6, "heads": 4, "intermediate": 1024},
}


def random_tiny(out_dir: Path, size: str = "1M", seed: int = 0) -> Path:
    """The tiny Llama of `size` with random weights, saved as a Hugging Face folder."""
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, TinyConfig(**SIZES[size]))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def export_revision(rev: str, dest: Path) -> Path:
    """The files of git revision `rev` of this checkout, extracted into `dest` (a benchmark's baseline)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def arith_data(out_dir: Path, train_size: int = 256) -> Path:
    """The arith task's splits (klrl prepare-data), small."""
    prepare("arith", out_dir, seed=0, sizes={"train": train_size, "test": 32})
    return out_dir


def non_embedding_params(model) -> int:
    embedding = model.get_input_embeddings().weight.numel()
    return sum(p.numel() for p in model.parameters()) - embedding


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished and waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine() -> str:
    """CPU model, core count, date, load average: the line every results table starts with."""
    model = platform.processor() or "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [
            line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")
        ]
        model = names[0] if names else model
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{model}, {os.cpu_count()} cores, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M')}, load average {load}"


def verdict(target: str, figure: str, met: bool | None) -> str:
    """The one line `make bench` collects per target: `verdict: <target>: <figure>: met|not met`
    (`met` None: no verdict in this run, e.g. no baseline to compare with). Printed, and appended
    to the file named by KLRL_BENCH_VERDICTS when set, so that one run lists every target."""
    line = f"verdict: {target}: {figure}: " + {True: "met", False: "NOT MET", None: "no verdict"}[met]
    print(line, flush=True)
    if os.environ.get("KLRL_BENCH_VERDICTS"):
        with open(os.environ["KLRL_BENCH_VERDICTS"], "a") as handle:
            handle.write(f"{line} ({machine()})\n")
    return line


def median(values) -> float:
    return statistics.median(values)


def markdown_table(header: list[str], rows: list[list]) -> str:
    def cell(value):
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
