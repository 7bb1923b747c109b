"""The MATH and MMLU loaders through the real `datasets`, on local copies of the Hub's dataset
repositories (klrl.tasks.hub), written here as the Hub lays them out:

    HuggingFaceH4/MATH-500      README.md (a card without configs), test.jsonl: problem, solution,
                                answer, subject, level (an integer), unique_id
    cais/mmlu                   README.md whose YAML names one config per subject, each with the
                                splits test, validation and dev in <subject>/<split>-00000-of-00001.parquet;
                                question, subject, choices (4 strings), answer (a class label A-D)
    EleutherAI/hendrycks_math   README.md with one config per subject, <subject>/{train,test}-00000-of-00001.parquet;
                                problem, level ("Level 3"), type, solution

(the file names, splits and columns of the Hub's repositories and cards, fewer rows). The
loaders make the same `load_dataset` calls as online, with the copy's path for the repository
id; sockets are refused throughout (tests/tasks/conftest.py).
"""

from __future__ import annotations

import json

import datasets
import pytest
import yaml

from klrl.tasks import math as math_task
from klrl.tasks import mmlu
from klrl.tasks.data import prepare, read_split
from klrl.tasks.hub import MIRROR, hub_dataset

from conftest import records

MMLU_FEATURES = datasets.Features(
    {
        "question": datasets.Value("string"),
        "subject": datasets.Value("string"),
        "choices": datasets.List(datasets.Value("string")),
        "answer": datasets.ClassLabel(names=list("ABCD")),
    }
)
MATH_FEATURES = datasets.Features({name: datasets.Value("string") for name in ("problem", "level", "type", "solution")})


def _card(path, metadata: dict, title: str) -> None:
    path.write_text(f"---\n{yaml.safe_dump(metadata, sort_keys=False)}---\n\n# {title}\n")


def _parquet_repo(repo, tables: dict[str, dict[str, list[dict]]], features: datasets.Features, title: str) -> None:
    """A repository of parquet configs: tables[config][split] = rows, and the card naming them."""
    info, configs = [], []
    for config, splits in tables.items():
        for split, rows in splits.items():
            (repo / config).mkdir(parents=True, exist_ok=True)
            datasets.Dataset.from_list(rows, features=features).to_parquet(
                repo / config / f"{split}-00000-of-00001.parquet"
            )
        info.append(
            {
                "config_name": config,
                "features": features._to_yaml_list(),
                "splits": [{"name": s, "num_examples": len(r)} for s, r in splits.items()],
            }
        )
        configs.append(
            {"config_name": config, "data_files": [{"split": split, "path": f"{config}/{split}-*"} for split in splits]}
        )
    _card(repo / "README.md", {"language": ["en"], "license": "mit", "dataset_info": info, "configs": configs}, title)


def _math500_rows() -> list[dict]:
    raws = records(math_task.FIXTURE)
    return [
        {
            "problem": raw["problem"],
            "solution": raw["solution"],
            "answer": math_task.solution_answer(raw["solution"]),
            "subject": raw["type"],
            "level": i % 5 + 1,
            "unique_id": f"test/{raw['type'].lower()}/{100 + i}.json",
        }
        for i, raw in enumerate(raws[:6])
    ]


def _mmlu_tables() -> dict:
    raws = records(mmlu.FIXTURE)
    tables = {}
    for subject in mmlu.SUBJECTS:
        rows = [raw for raw in raws if raw["subject"] == subject]
        tables[subject] = {"test": rows, "validation": rows[:2], "dev": rows[2:3]}
    return tables


def _math_train_tables() -> dict:
    raws = records(math_task.FIXTURE)
    configs = {
        subject: [raw for raw in raws if raw["type"].lower().replace(" & ", "_and_").replace(" ", "_") == subject]
        for subject in math_task.SUBJECTS
    }
    return {subject: {"train": rows, "test": rows[:1]} for subject, rows in configs.items()}


@pytest.fixture
def hub_copies(tmp_path, monkeypatch):
    """The three repositories under a mirror folder, KLRL_HUB_DATASETS pointing at it and the
    `datasets` cache in the test's folder."""
    mirror = tmp_path / "mirror"
    math500 = mirror / math_task.TEST_HUB
    math500.mkdir(parents=True)
    _card(
        math500 / "README.md",
        {"task_categories": ["text-generation"], "language": ["en"], "pretty_name": "MATH-500"},
        "Dataset Card for MATH-500",
    )
    (math500 / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _math500_rows()))
    _parquet_repo(mirror / mmlu.HUB, _mmlu_tables(), MMLU_FEATURES, "MMLU")
    _parquet_repo(mirror / math_task.TRAIN_HUB, _math_train_tables(), MATH_FEATURES, "MATH")
    monkeypatch.setenv(MIRROR, str(mirror))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    return mirror


def test_math500_and_math_train_read_from_copies_of_the_hub(hub_copies, tmp_path):
    math500 = _math500_rows()
    assert math_task.load_math("test") == [
        math_task.convert(raw, raw["unique_id"], math_task.TEST_HUB) for raw in math500
    ]
    expected_train = [
        math_task.convert(raw, f"math/train/{subject}/{i}", f"{math_task.TRAIN_HUB}[{subject}]")
        for subject, splits in _math_train_tables().items()
        for i, raw in enumerate(splits["train"])
    ]
    assert math_task.load_math("train") == expected_train and len(expected_train) == 36
    manifest = prepare("math", tmp_path / "prepared", source="hub")
    assert manifest["source"] == "hub" and {info["count"] for info in manifest["files"].values()} == {36, 6}
    test = read_split(tmp_path / "prepared" / "test.jsonl")
    assert [row["meta"]["level"] for row in test] == [1, 2, 3, 4, 5, 1] and test[0]["answer"] == math500[0]["answer"]


def test_mmlu_reads_each_subjects_test_split_from_a_copy_of_the_hub(hub_copies):
    for subject, splits in _mmlu_tables().items():
        rows = mmlu.load_mmlu(subject)
        assert rows == [
            mmlu.convert(raw, f"mmlu/{subject}/{i}", f"{mmlu.HUB}[{subject}]") for i, raw in enumerate(splits["test"])
        ]
        assert [row["answer"] for row in rows] == [
            "ABCD"[raw["answer"]] for raw in splits["test"]
        ]  # the class label read back as its index


def test_a_mirror_without_the_repository_is_an_error_naming_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(MIRROR, str(tmp_path))
    with pytest.raises(
        ValueError, match=f"{MIRROR}={tmp_path} has no copy of the Hub dataset cais/mmlu .*{tmp_path}/cais/mmlu"
    ):
        mmlu.load_mmlu("college_physics")
    monkeypatch.delenv(MIRROR)
    assert hub_dataset("cais/mmlu") == "cais/mmlu"
