"""envs/link_identical_files.py: a venv's large files that another finished venv holds byte for
byte become hard links to them; every other file is left as it was."""

import os
import sys

from workflow_helpers import ROOT

sys.path.insert(0, str(ROOT / "envs"))
from link_identical_files import MIN_BYTES, link_identical, main  # noqa: E402

LARGE = MIN_BYTES + 1


def _venv(root, name, python, files, stamp=".installed"):
    venv = root / name
    packages = venv / "lib" / python / "site-packages"
    for relative, content in files.items():
        (packages / relative).parent.mkdir(parents=True, exist_ok=True)
        (packages / relative).write_bytes(content)
    if stamp:
        (venv / stamp).touch()
    return venv, packages


def test_identical_large_files_share_one_copy_and_the_rest_stay_apart(tmp_path):
    library = os.urandom(LARGE)
    changed = bytearray(library)
    changed[-1] ^= 1
    small = b"x" * (MIN_BYTES - 1)
    _, first = _venv(
        tmp_path,
        "first",
        "python3.12",
        {"nvidia/lib/libcublas.so": library, "torch/lib/libtorch.so": library, "tiny.py": small},
        stamp=".installed-packages",
    )
    target, second = _venv(
        tmp_path,
        "second",
        "python3.13",
        {
            "nvidia/lib/libcublas.so": library,
            "torch/lib/libtorch.so": bytes(changed),
            "tiny.py": small,
            "elsewhere/libcublas.so": library,
        },
    )

    for packages in (first, second):
        (packages / "nvidia/lib/libcublas.so.13").symlink_to("libcublas.so")
    assert link_identical(target, [tmp_path / "first", target]) == (1, LARGE)
    assert (second / "nvidia/lib/libcublas.so.13").readlink().name == "libcublas.so"  # a link stays a link

    assert (second / "nvidia/lib/libcublas.so").stat().st_ino == (first / "nvidia/lib/libcublas.so").stat().st_ino
    assert (second / "nvidia/lib/libcublas.so").read_bytes() == library
    assert (second / "torch/lib/libtorch.so").read_bytes() == bytes(changed)  # same size, other bytes
    assert (second / "torch/lib/libtorch.so").stat().st_nlink == 1
    assert (second / "tiny.py").stat().st_nlink == 1  # under MIN_BYTES
    assert (second / "elsewhere/libcublas.so").stat().st_nlink == 1  # same bytes, another path
    assert sorted(p.name for p in (second / "nvidia/lib").iterdir()) == [
        "libcublas.so",
        "libcublas.so.13",
    ]  # no temporary
    assert link_identical(target, [tmp_path / "first"]) == (0, 0)  # already one file


def test_a_venv_without_a_stamp_is_still_installing_and_is_not_linked_to(tmp_path):
    library = os.urandom(LARGE)
    _venv(tmp_path, "installing", "python3.11", {"torch/lib/libtorch.so": library}, stamp=None)
    target, packages = _venv(tmp_path, "done", "python3.11", {"torch/lib/libtorch.so": library})
    assert link_identical(target, [tmp_path / "installing"]) == (0, 0)
    assert (packages / "torch/lib/libtorch.so").stat().st_nlink == 1


def test_the_command_says_what_it_freed(tmp_path, capsys):
    library = os.urandom(LARGE)
    _venv(tmp_path, "a", "python3.11", {"m.so": library})
    target, _ = _venv(tmp_path, "b", "python3.11", {"m.so": library})
    assert main([str(target), str(tmp_path / "a"), str(tmp_path / "missing")]) == 0
    assert capsys.readouterr().out == f"{target}: 1 files linked to identical ones in the other venvs, 0.00 GiB freed\n"
    assert main([]) == 2


def test_a_filesystem_without_hard_links_leaves_every_file_a_copy(tmp_path, monkeypatch, capsys):
    library = os.urandom(LARGE)
    _venv(tmp_path, "a", "python3.11", {"m.so": library, "n.so": library})
    target, packages = _venv(tmp_path, "b", "python3.11", {"m.so": library, "n.so": library})

    def refuse(source, destination):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", refuse)
    assert link_identical(target, [tmp_path / "a"]) == (0, 0)
    assert sorted(p.name for p in packages.iterdir()) == ["m.so", "n.so"]
    assert (packages / "m.so").read_bytes() == library
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{target}: no hard link to ") and line.endswith(
        "(Operation not permitted): the files stay copies"
    )
