"""`klrl audit --config` on the corpus of launch files in tests/audit/configs/, each modelled on a library's own
example at a pinned commit: every file is read as configs/expected.yaml states by hand (library, audited setting,
β, or the one line it is refused with), every audited setting's on-policy verdict in docs/audit.md's generated
audit block is the expected one, and removing one old-flag entry or one alias from the readers' tables makes the
corpus fail."""

import re
from pathlib import Path

import pytest
import yaml

from klrl.audit import openrlhf_flags, verl_config
from klrl.audit.user_config import read_config

CONFIGS = Path(__file__).parent / "configs"
EXPECTED = yaml.safe_load((CONFIGS / "expected.yaml").read_text())
DOCS = Path(__file__).parents[2] / "docs" / "audit.md"


def documented_verdicts() -> dict[tuple[str, str], str]:
    """(library, setting) -> its on-policy verdict, from docs/audit.md's audit block."""
    text = DOCS.read_text().split("<!-- audit:begin -->")[1].split("<!-- audit:end -->")[0]
    verdicts, library = {}, None
    for line in text.splitlines():
        if line.endswith(":") and not line.startswith("|"):
            library = line.split()[0]
        elif line.startswith("| ") and not line.startswith(("| setting", "|---")):
            setting, on = (cell.strip() for cell in line.strip("|").split("|")[:2])
            verdicts[(library, setting)] = on.split(",")[0]
    return verdicts


def mismatches(name: str, expected: dict) -> list[str]:
    """How reading the corpus file `name` differs from its expected entry (none: as expected)."""
    path = CONFIGS / name
    try:
        reading = read_config(path)
    except ValueError as error:
        message = str(error)
        if "\n" in message or not message.startswith(str(path)):
            return [f"{name}: not one line naming the file: {message!r}"]
        if "error" not in expected:
            return [f"{name}: refused: {message}"]
        return [] if expected["error"] in message else [f"{name}: refused otherwise: {message}"]
    if "error" in expected:
        return [f"{name}: read as {reading.setting!r}, expected the refusal {expected['error']!r}"]
    got = {"library": reading.library, "setting": reading.setting, "no_kl": reading.no_kl or None}
    if reading.setting:
        got["beta"] = reading.beta
    want = {key: expected.get(key) for key in got}
    return [] if got == want else [f"{name}: read as {got}, expected {want}"]


def test_the_corpus_is_at_least_25_files_each_with_its_expectation():
    files = {str(path.relative_to(CONFIGS)) for path in CONFIGS.rglob("*") if path.is_file()} - {"expected.yaml"}
    assert files == set(EXPECTED) and len(files) >= 25
    for name, expected in EXPECTED.items():
        assert {"follows", "library", "kl", "source"} <= set(expected), name
        commit = re.search(r"\b[0-9a-f]{40}\b|@ (v[\d.]+)", expected["follows"])
        commit = commit.group(1) or commit.group()
        if not name.endswith(".json"):  # JSON holds no comment: the entry names what it follows
            assert commit in (CONFIGS / name).read_text(), f"{name} does not name the commit it follows"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_launch_file_is_read_as_expected(name):
    if EXPECTED[name]["library"] == "TRL":
        pytest.importorskip("trl")
    assert mismatches(name, EXPECTED[name]) == []


def test_each_expected_verdict_is_the_audit_blocks():
    verdicts = documented_verdicts()
    stated = {name: entry for name, entry in EXPECTED.items() if "setting" in entry}
    assert len(stated) >= 15
    for name, entry in stated.items():
        assert verdicts[(entry["library"], entry["setting"])] == entry["verdict"], name


def without(table: dict, key: str) -> dict:
    return {name: value for name, value in table.items() if name != key}


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ((openrlhf_flags, "EARLIER"), "use_kl_estimator_k3"),
        ((openrlhf_flags, "RENAMED_0_10_2"), "kl_estimator"),
        ((openrlhf_flags, "RENAMED_0_10_2"), "init_kl_coef"),
        ((verl_config, "ESTIMATOR_ALIASES"), "mse"),
        ((verl_config, "ESTIMATOR_ALIASES"), "low_var_kl"),
        ((verl_config, "ESTIMATOR_ALIASES"), "kl"),
    ],
)
def test_removing_an_old_flag_or_an_alias_fails_the_corpus(monkeypatch, table, key):
    module, name = table
    monkeypatch.setattr(module, name, without(getattr(module, name), key))
    readable = {name: entry for name, entry in EXPECTED.items() if entry["library"] in ("verl", "OpenRLHF")}
    assert [problem for name, entry in readable.items() for problem in mismatches(name, entry)]
