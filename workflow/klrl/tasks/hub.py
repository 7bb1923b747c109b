"""Where the loaders' `datasets.load_dataset` calls find a Hub dataset: on the Hub, or in a
local mirror of its repository.

Machines without access to the Hub (cluster compute nodes often have none) set
KLRL_HUB_DATASETS to a folder of copies of the dataset repositories, each at
<folder>/<owner>/<name> and laid out file for file as on the Hub (what
`hf download --repo-type dataset <owner>/<name> --local-dir <folder>/<owner>/<name>` writes).
The loaders then make the same calls with the copy's path in place of the repository id, and
`datasets` reads the copy's README configs, splits and data files as it reads the Hub's
(tests/tasks/test_hub_copies.py runs both loaders on such copies).
"""

from __future__ import annotations

import os
from pathlib import Path

MIRROR = "KLRL_HUB_DATASETS"


def hub_dataset(repo: str) -> str:
    """What to pass `datasets.load_dataset` for the Hub dataset `repo` ("owner/name"): the id
    itself, or the path of its copy under KLRL_HUB_DATASETS when that is set (an error if the
    copy is missing: the Hub is not tried instead)."""
    mirror = os.environ.get(MIRROR)
    if not mirror:
        return repo
    copy = Path(mirror) / repo
    if not copy.is_dir():
        raise ValueError(f"{MIRROR}={mirror} has no copy of the Hub dataset {repo} (expected the folder {copy})")
    return str(copy)
