"""Prepared task data on disk: `klrl prepare-data` writes it, the trainer and lm-eval read it.

One folder per task: `<split>.jsonl` (one row per line: id, problem, prompt, answer, meta, and
`shots` when the config gives worked examples) and `manifest.json` (generator, version, seed,
source, instruction, shots, and per file the row count and sha256). Shots are (user, assistant)
turns shown before each prompt as earlier turns of the chat: the trainer and lm-eval (its
multi-turn few-shot) both put them there. `read_split` checks every row (encoding, fields, the answer against the
task's reward, size limits) and names the file and line of a bad one, then the file's sha256
against the manifest.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from klrl import __version__
from klrl.core.files import read_jsonl, sha256_file, write_atomic, write_jsonl
from klrl.grading.rewards import check_reference
from klrl.tasks import get_task, load_rows

ROW_FIELDS = {"id": str, "problem": str, "prompt": str, "answer": str, "meta": dict}
MAX_PROMPT_TOKENS = 2048  # default limits, configurable (TrainConfig, `klrl evaluate`)
MAX_ANSWER_CHARS = 1000
CHARS_PER_TOKEN_BOUND = 32  # no tokenizer averages more characters per token on real text


def prepare(
    task_name: str,
    out_dir: Path,
    *,
    seed: int = 0,
    sizes: dict[str, int] | None = None,
    source: str | None = None,
    instruction: str | None = None,
    shots: list[dict] | None = None,
) -> dict:
    """Write every split of a task and its manifest; returns the manifest. `shots`: worked
    examples, each {"user": ..., "assistant": ...}, shown before every prompt."""
    task = get_task(task_name)
    sizes = sizes or {}
    unknown = set(sizes) - set(task.splits)
    if unknown:
        raise ValueError(
            f"sizes: task {task_name!r} has no split {sorted(unknown)}; its splits: {', '.join(task.splits)}"
        )
    instruction = task.instruction if instruction is None else instruction
    shots = check_shots(shots or [], "shots")
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for split in task.splits:
        rows = load_rows(task, split, seed=seed, size=sizes.get(split), source=source)
        rows = [{**row, "prompt": row["problem"] + instruction} | ({"shots": shots} if shots else {}) for row in rows]
        path = out_dir / f"{split}.jsonl"
        write_jsonl(path, rows, sort_keys=True)
        files[path.name] = {"split": split, "count": len(rows), "sha256": sha256_file(path)}
    manifest = {
        "task": task.name,
        "reward": task.reward,
        "generator": task.loader.__module__ + "." + task.loader.__name__,
        "version": __version__,
        "seed": seed,
        "source": source or task.source,
        "instruction": instruction,
        "shots": shots,
        "files": files,
    }
    write_atomic(out_dir / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest


def check_shots(shots, where: str) -> list[dict]:
    """`shots` if it is a list of {"user": text, "assistant": text}; ValueError naming `where` otherwise."""
    if not isinstance(shots, list) or not all(
        isinstance(shot, dict)
        and set(shot) == {"user", "assistant"}
        and all(isinstance(text, str) for text in shot.values())
        for shot in shots
    ):
        raise ValueError(f'{where}: must be a list of {{"user": text, "assistant": text}}, got {shots!r:.80}')
    return shots


def read_manifest(folder: Path) -> dict:
    """The manifest of a prepared task folder; ValueError if it is missing or not a manifest."""
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        raise ValueError(f"{folder}: no manifest.json; prepare it with `python -m klrl prepare-data`")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error.msg})") from None
    missing = [key for key in ("task", "reward", "files") if key not in manifest]
    if missing:
        raise ValueError(f"{path}: missing key {missing[0]!r}")
    return manifest


@dataclass(frozen=True)
class RowLimits:
    """Per-row size limits, checked when a split is read: one oversized row must not take the
    machine down (a 10 MB prompt drives generation to tens of GB)."""

    max_prompt_tokens: int = MAX_PROMPT_TOKENS
    max_answer_chars: int = MAX_ANSWER_CHARS


def read_split(path: Path, reward: str | None = None, limits: RowLimits = RowLimits(), count_tokens=None) -> list[dict]:
    """Rows of one prepared split, each checked; a bad row raises ValueError naming file:line.

    Checked per row: UTF-8, JSON, the fields and their types, the answer against the task's
    reward (the manifest's, else `reward`; klrl.grading.rewards.check_reference), the answer's length in
    characters and the prompt's in tokens (`count_tokens(text)`, a tokenizer's; without one,
    or before tokenizing, CHARS_PER_TOKEN_BOUND characters per token). Then the file's sha256
    against the manifest beside it, when there is one: a file edited after prepare-data is refused.
    """
    path = Path(path)
    manifest = read_manifest(path.parent) if (path.parent / "manifest.json").is_file() else None
    reward = manifest["reward"] if manifest is not None else reward
    rows = [line.record for line in read_jsonl(path, check=lambda row: _check_row(row, reward, limits, count_tokens))]
    if not rows:
        raise ValueError(f"{path}: no rows")
    recorded = ((manifest or {}).get("files") or {}).get(path.name, {}).get("sha256")
    if recorded and sha256_file(path) != recorded:
        raise ValueError(
            f"{path}: changed since prepare-data (sha256 {sha256_file(path)[:12]}…, the manifest says {recorded[:12]}…); "
            "prepare it again"
        )
    return rows


def _check_row(row: dict, reward: str | None, limits: RowLimits, count_tokens) -> None:
    """A ValueError saying what is wrong with one row of a split (read_jsonl names its file:line)."""
    for name, kind in ROW_FIELDS.items():
        if not isinstance(row.get(name), kind):
            raise ValueError(f"field {name!r} must be a {kind.__name__}, got {row.get(name)!r:.80}")
    if len(row["answer"]) > limits.max_answer_chars:
        raise ValueError(f"answer of {len(row['answer'])} characters, over max_answer_chars={limits.max_answer_chars}")
    if reward is not None and (problem := check_reference(reward, row["answer"])):
        raise ValueError(f"answer {row['answer']!r:.80} is not {problem} ({reward} reward)")
    check_shots(row.get("shots", []), "field 'shots'")
    prompt = "".join(shot["user"] + shot["assistant"] for shot in row.get("shots", [])) + row["prompt"]
    tokens = len(prompt) / CHARS_PER_TOKEN_BOUND
    if tokens <= limits.max_prompt_tokens and count_tokens is not None:
        tokens = count_tokens(prompt)
    if tokens > limits.max_prompt_tokens:
        raise ValueError(f"prompt of {math.ceil(tokens)}+ tokens, over max_prompt_tokens={limits.max_prompt_tokens}")
