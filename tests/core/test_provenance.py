"""The code's commit as a cell records it (klrl.core.provenance.source_commit): in a git
checkout, in an archive that `git archive` wrote with the project's .gitattributes, in a plain
copy and without git."""

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from workflow_helpers import ROOT

PROVENANCE = Path("workflow/klrl/core/provenance.py")
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _source_commit(copy: Path) -> str:
    """source_commit() of the provenance module in the tree `copy`, imported from there."""
    spec = importlib.util.spec_from_file_location(f"provenance_{copy.name}", copy / PROVENANCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.source_commit()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A git repository holding the project's .gitattributes and provenance module (its archive
    placeholder restored where the suite itself runs from an archive), committed once."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above tmp_path is found
    repo = tmp_path / "checkout"
    (repo / PROVENANCE).parent.mkdir(parents=True)
    shutil.copy(ROOT / ".gitattributes", repo / ".gitattributes")
    source = (ROOT / PROVENANCE).read_text()
    placeholder = "$" + "Format:%h$"
    (repo / PROVENANCE).write_text(re.sub(r'(?m)^ARCHIVE_COMMIT = ".*"$', f'ARCHIVE_COMMIT = "{placeholder}"', source))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "code"], cwd=repo, check=True)
    return repo


def _short_head(repo: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True)
    return done.stdout.strip()


def test_a_checkout_records_its_head(checkout):
    head = _short_head(checkout)
    assert re.fullmatch(r"[0-9a-f]{7,}", head)
    assert _source_commit(checkout) == head


def test_an_unpacked_git_archive_records_the_archived_commit(checkout, tmp_path):
    archive = tmp_path / "archive.tar"
    subprocess.run(["git", "archive", "--output", str(archive), "HEAD"], cwd=checkout, check=True)
    (tmp_path / "unpacked").mkdir()
    subprocess.run(["tar", "-xf", str(archive), "-C", str(tmp_path / "unpacked")], check=True)  # as make test unpacks
    assert not (tmp_path / "unpacked" / ".git").exists()
    assert _source_commit(tmp_path / "unpacked") == _short_head(checkout)


def test_a_plain_copy_or_a_machine_without_git_records_no_commit(checkout, tmp_path, monkeypatch):
    shutil.copytree(checkout, tmp_path / "copy", ignore=shutil.ignore_patterns(".git"))
    assert _source_commit(tmp_path / "copy") == "not a git checkout"
    monkeypatch.setenv("PATH", str(tmp_path / "no-git"))
    assert _source_commit(checkout) == "not a git checkout"
