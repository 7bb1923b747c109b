"""The Python side of this project's lm-eval tasks: load a prepared split, keep every sample, grade.

The task template beside this file (`_template_yaml`, which every task's config includes) names
these functions with `!function hooks.<name>`. Grading
calls `klrl.grading.rewards`, the functions RL training rewards with, so "correct" has one definition.
"""

from __future__ import annotations

from pathlib import Path

import datasets

from klrl.grading.rewards import get_reward
from klrl.tasks.data import read_manifest, read_split

DOC_FIELDS = ("id", "problem", "prompt", "answer")
SHOTS_SPLIT = (
    "shots"  # the manifest's worked examples, as the few-shot split (prompt: user turn, answer: assistant turn)
)


def load_prepared_split(data_dir: str, task: str, split: str = "test", **_metadata) -> dict[str, datasets.Dataset]:
    """`custom_dataset`: the rows of `<data_dir>/<task>/<split>.jsonl`, each tagged with the task's
    reward, and the manifest's shots as the split SHOTS_SPLIT (empty when it has none).

    `data_dir` comes from the TaskManager's metadata, `task` and `split` from the YAML's
    `dataset_kwargs`; lm-eval also passes the task's own metadata, which is ignored. A bad row
    raises ValueError naming its file and line (`klrl.tasks.data.read_split`).
    """
    folder = Path(data_dir) / task
    manifest = read_manifest(folder)
    reward = manifest["reward"]
    rows = [
        {name: row[name] for name in DOC_FIELDS} | {"reward": reward} for row in read_split(folder / f"{split}.jsonl")
    ]
    shots = [
        {
            "id": f"shot-{i}",
            "problem": shot["user"],
            "prompt": shot["user"],
            "answer": shot["assistant"],
            "reward": reward,
        }
        for i, shot in enumerate(manifest.get("shots", []))
    ]
    columns = {name: [] for name in (*DOC_FIELDS, "reward")}
    return {
        split: datasets.Dataset.from_list(rows),
        SHOTS_SPLIT: datasets.Dataset.from_list(shots) if shots else datasets.Dataset.from_dict(columns),
    }


def keep_all_samples(resps, docs):
    """Filter: pass all n sampled completions of each problem on to grading (lm-eval keeps one by default)."""
    return resps


def grade(doc: dict, results: list[list[str]]) -> dict:
    """Per problem: the reward of each completion and their mean, the problem's pass@1.

    >>> doc = {"answer": "7", "reward": "arithmetic"}
    >>> grade(doc, [[r"\\boxed{7}", "7", r"\\boxed{8}", r"so \\boxed{7}"]])
    {'pass@1': 0.5, 'rewards': [1.0, 0.0, 0.0, 1.0]}
    """
    (completions,) = results
    rewards = get_reward(doc["reward"])(completions, [doc["answer"]] * len(completions))
    return {"pass@1": sum(rewards) / len(rewards), "rewards": rewards}


def mean_of_all_samples(per_problem: list[list[float]]) -> float:
    """Aggregation of `rewards`: the mean over every completion (equals pass@1 when n is the same for all)."""
    flat = [reward for rewards in per_problem for reward in rewards]
    return sum(flat) / len(flat)
