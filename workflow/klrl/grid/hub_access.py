"""Whether a grid's Hub models and data sets can be had before any job starts, and fetching them.

A compute job that finds its model gated without a token, or missing from the cache with the
Hub offline (HF_HUB_OFFLINE), fails hours into a grid. The Snakefile asks `first_problem` at
load instead, which names the first such model or data set in one line; `fetch` (the fetch verb)
downloads every one of them beforehand: the models into the Hub cache the jobs read, the data
sets as copies under the folder KLRL_HUB_DATASETS names (klrl.tasks.hub). Only the cache's
files are read here: importing huggingface_hub would slow every load of the Snakefile.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from klrl.tasks.hub import MIRROR

TRUE = ("1", "true", "yes", "on")


def hub_cache(environ: Mapping[str, str] = os.environ) -> Path:
    """The Hub cache huggingface_hub uses: HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"])
    return _hf_home(environ) / "hub"


def _hf_home(environ: Mapping[str, str]) -> Path:
    default = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    return Path(environ.get("HF_HOME") or default)


def has_token(environ: Mapping[str, str] = os.environ) -> bool:
    """A Hub token is given: HF_TOKEN, or the file `hf auth login` writes."""
    path = Path(environ.get("HF_TOKEN_PATH") or _hf_home(environ) / "token")
    return bool(environ.get("HF_TOKEN")) or (path.is_file() and bool(path.read_text().strip()))


def cached_model(hub_id: str, revision: str | None, cache: Path) -> bool:
    """The model's config.json at `revision` (a branch, tag or commit; default main) is in `cache`."""
    folder = cache / f"models--{hub_id.replace('/', '--')}"
    ref = folder / "refs" / (revision or "main")
    commit = ref.read_text().strip() if ref.is_file() else revision or "main"
    return (folder / "snapshots" / commit / "config.json").is_file()


def hub_needs(config: dict, cells: Mapping, prepared: set[str]) -> tuple[list, list]:
    """What the grid downloads: its Hub models [(name, BaseModel)] and, for the tasks whose data
    is not `prepared` yet, their Hub data sets [(task, repo)]."""
    from klrl.grid.expansion import used_tasks
    from klrl.models import get_base_model
    from klrl.tasks import get_task

    models = {}
    for cell in cells.values():
        base = get_base_model(cell.model, config.get("models"))
        if base.build == "hub" and not Path(base.hub_id).is_dir():
            models.setdefault(cell.model, base)
    data = config.get("data", {})
    datasets = [
        (task, repo)
        for task in used_tasks(cells)
        if task not in prepared and data.get(task, {}).get("source", get_task(task).source) == "hub"
        for repo in get_task(task).hub
    ]
    return list(models.items()), datasets


def first_problem(config: dict, cells: Mapping, prepared: set[str], environ: Mapping[str, str] = os.environ) -> str:
    """The first model or data set the grid cannot have, in one line ('' when none): a model not
    in the cache with the Hub offline, or gated with no token; a data set with the Hub offline and
    no copy under KLRL_HUB_DATASETS, or with KLRL_HUB_DATASETS set and no copy there."""
    from klrl.models.hub_sizes import HUB_SIZES

    offline = environ.get("HF_HUB_OFFLINE", "").lower() in TRUE
    cache = hub_cache(environ)
    fetch = "run `python -m klrl fetch --config <config>` where the Hub is reachable"
    models, datasets = hub_needs(config, cells, prepared)
    for name, base in models:
        if cached_model(base.hub_id, base.revision, cache):
            continue
        if offline:
            return f"model {name} ({base.hub_id}) is not in the Hub cache {cache} and HF_HUB_OFFLINE is set: {fetch}"
        size = HUB_SIZES.get(base.hub_id)
        if size and size.gated and not has_token(environ):
            return (
                f"model {name} ({base.hub_id}) is gated: accept its licence at https://huggingface.co/{base.hub_id},"
                " then set HF_TOKEN (or run `hf auth login`)"
            )
    mirror = environ.get(MIRROR)
    for task, repo in datasets:
        if mirror and not (Path(mirror) / repo).is_dir():
            return f"data set {repo} (task {task}) has no copy under {MIRROR}={mirror}: {fetch}"
        if offline and not mirror:
            return f"data set {repo} (task {task}) needs the Hub and HF_HUB_OFFLINE is set: set {MIRROR} to its copies ({fetch})"
    return ""


def fetch(config: dict, cells: Mapping, datasets_folder: Path, say=print) -> None:
    """Download the grid's Hub models into the Hub cache and its Hub data sets as copies under
    `datasets_folder` (what KLRL_HUB_DATASETS then names)."""
    from huggingface_hub import snapshot_download

    models, datasets = hub_needs(config, cells, prepared=set())
    for name, base in models:
        say(f"model {name}: {base.hub_id}" + (f" at {base.revision}" if base.revision else ""))
        snapshot_download(base.hub_id, revision=base.revision, ignore_patterns=["original/*"])  # Meta's own copy
    for repo, task in {repo: task for task, repo in datasets}.items():
        say(f"data set {repo} (task {task}) -> {datasets_folder / repo}")
        snapshot_download(repo, repo_type="dataset", local_dir=datasets_folder / repo)
