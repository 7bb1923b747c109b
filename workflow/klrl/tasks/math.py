"""The paper's in-domain task: MATH (Hendrycks et al.), trained on its train set, evaluated on MATH-500.

    load_math("train")  the 7,500 MATH train problems: the Hub's `EleutherAI/hendrycks_math`, its
                        seven subject configs concatenated in SUBJECTS order, split "train"; raw rows
                        have problem, level ("Level 3"), type (the subject) and solution, and the
                        reference answer is the content of the solution's last \\boxed{} (`solution_answer`).
    load_math("test")   MATH-500 (`HuggingFaceH4/MATH-500`, split "test"); raw rows also carry the
                        answer, subject, an integer level and a unique_id.

source="fixture" reads `fixtures/math.jsonl` instead: 36 hand-written problems in the raw train
format, 5-6 per subject. Its "test" split is every third problem of each subject (the 3rd, 6th, ...
in file order), "train" the rest. Both sources go through `convert`, so the fixture exercises the
exact conversion paper-scale runs use; local copies of the Hub's repositories take the Hub's
place under KLRL_HUB_DATASETS (klrl.tasks.hub). A malformed raw row raises ValueError naming the
source, the row and the problem; nothing is skipped silently.
"""

from __future__ import annotations

import re
from pathlib import Path

from klrl.grading.answers import extract_boxed
from klrl.core.files import read_jsonl
from klrl.tasks.hub import hub_dataset

TRAIN_HUB = "EleutherAI/hendrycks_math"
TEST_HUB = "HuggingFaceH4/MATH-500"
SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)
FIXTURE = Path(__file__).parent / "fixtures" / "math.jsonl"
_UNBRACED_BOX = re.compile(r"\\boxed\s+([^\s{$][^$]*)")


def solution_answer(solution: str) -> str | None:
    r"""The reference answer of a MATH solution: its last \boxed{} content, stripped; None if absent.

    Extraction is the rewards' own (`klrl.grading.answers.extract_boxed`, braces matched, \fbox too), after
    rewriting MATH's old brace-less form "\boxed 5" (up to the next "$") as "\boxed{5}".

    >>> solution_answer(r"$\boxed{1}$, then $x = \boxed{ \frac{1}{2} }$."), solution_answer(r"so $\boxed 7$.")
    ('\\frac{1}{2}', '7')
    """
    answer = extract_boxed(_UNBRACED_BOX.sub(r"\\boxed{\1}", solution))
    return answer.strip() if answer else None


def _level(value: object) -> int | None:
    """An integer level from 3 or "Level 3"; None for MATH's few "Level ?" rows."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.startswith("Level "):
        number = value.removeprefix("Level ")
        if number.isdigit():
            return int(number)
        if number == "?":
            return None
    raise ValueError(f"level {value!r} is neither an integer nor 'Level N'")


def _text(raw: dict, field: str) -> str:
    value = raw.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"field {field!r} is missing or not a non-empty string (got {value!r})")
    return value


def convert(raw: dict, row_id: str, source: str) -> dict:
    """One raw Hub row, MATH train format or MATH-500 format, as a task row.

    A MATH-500 row (it has an `answer`) keeps its answer and subject; a MATH train row takes the
    last boxed content of its solution and its `type` as the subject.
    """
    try:
        if not isinstance(raw, dict):
            raise ValueError(f"row is a {type(raw).__name__}, not a dict")
        problem, solution = _text(raw, "problem"), _text(raw, "solution")
        if "answer" in raw:
            answer, subject = _text(raw, "answer").strip(), _text(raw, "subject")
        else:
            answer, subject = solution_answer(solution), _text(raw, "type")
            if not answer:
                raise ValueError("the solution has no non-empty \\boxed{} answer")
        meta = {"subject": subject, "level": _level(raw.get("level")), "source": source}
    except ValueError as error:
        raise ValueError(f"{source} row {row_id}: {error}") from None
    return {"id": row_id, "problem": problem, "answer": answer, "meta": meta}


def _hub_rows(split: str) -> list[dict]:
    import datasets

    if split == "test":
        raws = datasets.load_dataset(hub_dataset(TEST_HUB), split="test")
        return [convert(raw, raw.get("unique_id") or f"math500/{i}", TEST_HUB) for i, raw in enumerate(raws)]
    rows = []
    for subject in SUBJECTS:
        raws = datasets.load_dataset(hub_dataset(TRAIN_HUB), subject, split="train")
        rows += [convert(raw, f"math/train/{subject}/{i}", f"{TRAIN_HUB}[{subject}]") for i, raw in enumerate(raws)]
    return rows


def _fixture_rows(split: str) -> list[dict]:
    source = f"fixture {FIXTURE.name}"
    rows, seen = [], {}
    for number, raw, _ in read_jsonl(FIXTURE):
        row = convert(raw, f"math/fixture/{number}", source)
        rank = seen[row["meta"]["subject"]] = seen.get(row["meta"]["subject"], 0) + 1
        if (rank % 3 == 0) == (split == "test"):
            rows.append(row)
    return rows


def load_math(split: str, source: str = "hub") -> list[dict]:
    """MATH rows {id, problem, answer, meta: {subject, level, source}} of `split` ("train"/"test")."""
    if split not in ("train", "test"):
        raise ValueError(f"MATH split {split!r} is not one of train, test")
    if source == "hub":
        return _hub_rows(split)
    if source == "fixture":
        return _fixture_rows(split)
    raise ValueError(f"MATH source {source!r} is not one of hub, fixture")
