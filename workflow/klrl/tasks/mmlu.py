"""The paper's out-of-domain evaluation: MMLU college physics, chemistry and biology.

Hub: `cais/mmlu`, config = the subject, split "test"; raw rows have question, subject, choices
(4 strings) and answer (the index 0-3 of the right choice). Each question is posed for a boxed
answer: the question, one line "(A) ..." per choice, then "Answer with the letter of the correct
choice."; the reference answer is the letter. source="fixture" reads `fixtures/mmlu.jsonl`, six
hand-written questions per subject in the same raw format, through the same `convert`. A malformed
raw row raises ValueError naming the source, the row and the problem. A local copy of the Hub's
repository takes the Hub's place under KLRL_HUB_DATASETS (klrl.tasks.hub).
"""

from __future__ import annotations

from pathlib import Path

from klrl.core.files import read_jsonl
from klrl.tasks.hub import hub_dataset

HUB = "cais/mmlu"
SUBJECTS = ("college_physics", "college_chemistry", "college_biology")
LETTERS = "ABCD"
FIXTURE = Path(__file__).parent / "fixtures" / "mmlu.jsonl"


def convert(raw: dict, row_id: str, source: str) -> dict:
    """One raw `cais/mmlu` row as a task row: the lettered question and the right letter."""
    try:
        if not isinstance(raw, dict):
            raise ValueError(f"row is a {type(raw).__name__}, not a dict")
        question, choices, index = raw.get("question"), raw.get("choices"), raw.get("answer")
        if not isinstance(raw.get("subject"), str):
            raise ValueError(f"subject {raw.get('subject')!r} is not a string")
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"question {question!r} is not a non-empty string")
        if not isinstance(choices, list) or len(choices) != 4 or not all(isinstance(c, str) for c in choices):
            raise ValueError(f"choices {choices!r} are not a list of 4 strings")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 4:
            raise ValueError(f"answer {index!r} is not an index 0-3")
    except ValueError as error:
        raise ValueError(f"{source} row {row_id}: {error}") from None
    lines = [f"({letter}) {choice.strip()}" for letter, choice in zip(LETTERS, choices)]
    problem = f"{question.strip()}\n" + "\n".join(lines) + "\nAnswer with the letter of the correct choice."
    meta = {"subject": raw["subject"], "choices": choices, "source": source}
    return {"id": row_id, "problem": problem, "answer": LETTERS[index], "meta": meta}


def load_mmlu(subject: str, source: str = "hub") -> list[dict]:
    """The test questions of one MMLU subject: rows {id, problem, answer (a letter), meta}."""
    if subject not in SUBJECTS:
        raise ValueError(f"MMLU subject {subject!r} is not one of {', '.join(SUBJECTS)}")
    if source == "hub":
        import datasets

        raws = datasets.load_dataset(hub_dataset(HUB), subject, split="test")
        return [convert(raw, f"mmlu/{subject}/{i}", f"{HUB}[{subject}]") for i, raw in enumerate(raws)]
    if source != "fixture":
        raise ValueError(f"MMLU source {source!r} is not one of hub, fixture")
    rows = []
    for number, raw, _ in read_jsonl(FIXTURE):
        row = convert(raw, f"mmlu/fixture/{number}", f"fixture {FIXTURE.name}")
        if row["meta"]["subject"] == subject:
            rows.append(row)
    return rows
