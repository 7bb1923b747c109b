"""The documentation names only what exists, and no tracked file says how the repository was built.

README.md, docs/*.md and config/README.md are read for what they name: repository paths (those
with placeholders such as `<cell>` or `{cell}` by their pattern) and Markdown links with their
anchors; make targets (from the Makefile); `klrl` verbs and their flags (from the command line's
own parsers); config keys (dotted keys in code spans, and YAML examples, against the config
schema); Snakemake rules (from workflow/rules/*.smk). Separately, every tracked text file is
searched for the words that describe how the work was scheduled rather than what the project is
(WORK_WORDS). Each failure is one line naming file:line.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from klrl.cli import VERBS
from klrl.models.builds import BUILT_MODELS
from klrl.verbs import build

ROOT = Path(__file__).resolve().parents[1]

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "config" / "README.md"]

# Top-level folders of the repository: a word starting with one of them and a slash is a path.
TOP = (
    "workflow",
    "tests",
    "docs",
    "config",
    "benchmarks",
    "tools",
    "paper_figures",
    "profiles",
    "envs",
    "requirements",
)
PATH = re.compile(r"(?<![\w./~-])((?:\.test|\.ci|" + "|".join(TOP) + r")/[^\s`'\"()\[\],;]*)")
PLACEHOLDER = re.compile(r"<[^>/]*>|\{[^}/]*\}|\b[A-Z][A-Z_]{2,}\b|\*")
# Tracked folders that a command writes, named before its first run: the folder and the Makefile's
# recipe text that writes it.
WRITTEN = {"docs/results/": "--publish docs/results/$(EXPERIMENT)"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
MAKE = re.compile(r"(?:^|[\s;&|(])make((?:\s+[A-Z_]+=(?:\"[^\"]*\"|\S+))*)\s+([a-z][\w.*-]*)")
KLRL = re.compile(r"\bklrl\s+([a-z][\w-]*)(.*)")
FLAG = re.compile(r"^\[?(--?[A-Za-z][\w-]*)")
DOTTED_KEY = re.compile(r"^([a-z_]+)((?:\.(?:[\w-]+|<[^>]+>))+)$")
FILE_NAME = re.compile(r"\.(?:jsonl?|py|lock|ya?ml|csv|md|txt|log|pt|png|pdf|tsv|db|gz)$")
RULE_OPTION = re.compile(r"--(?:forcerun|allowed-rules|until|omit-from)((?:\s+[a-z_]+)+)")
RULE_NAMED = re.compile(r"\brule `([a-z_]+)`|`([a-z_]+)` rule\b|`([a-z_]+)` \(?→|→ `([a-z_]+)`")

# The words about how the work was scheduled: a tracker's issue numbers, numbered stops, waves,
# work sessions and the nice level of shared runs. Not the bare words: "stop" and "session"
# (pytest's scope, an HTTP session) are ordinary, so only these phrases are refused.
WORK_WORDS = {
    "a tracker issue number": re.compile(r"\bissue \d+\b", re.I),
    "a numbered stop": re.compile(r"\bstop \d+\b", re.I),
    "a wave of work": re.compile(r"\bwaves?\b", re.I),
    "a work session": re.compile(r"\b(?:this|next|previous|earlier|later|a|one) session\b", re.I),
    "a nice level": re.compile(r"\bnice (?:-n )?19\b", re.I),
}


def code_units(text: str) -> list[tuple[int, str]]:
    """(line, code) for each line of a fenced block (continuation lines joined) and each inline span."""
    units, lines, fenced, held = [], text.split("\n"), False, None
    outside = []
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            outside.append("")
            continue
        outside.append("" if fenced else line)
        if not fenced:
            continue
        start, joined = held or (number, "")
        joined += " " + line.rstrip("\\")
        held = (start, joined) if line.endswith("\\") else None
        if held is None:
            units.append((start, joined.strip()))
    prose = "\n".join(outside)
    for span in re.finditer(r"`([^`]+)`", prose):
        if "\n\n" not in span[1]:
            units.append((prose.count("\n", 0, span.start()) + 1, span[1].replace("\n", " ")))
    return units


def yaml_fences(text: str) -> list[tuple[int, str]]:
    return [(text.count("\n", 0, m.start()) + 2, m[1]) for m in re.finditer(r"```yaml\n(.*?)```", text, re.S)]


def located(page, number: int) -> str:
    return f"{page.relative_to(ROOT)}:{number}"


def path_exists(path: str) -> bool:
    path, _, test = path.rstrip(".:").split("#")[0].partition("::")
    if test:  # a pytest node id: the file, and the test function in it
        file = ROOT / path
        return file.is_file() and bool(
            re.search(rf"^(?:async )?def {re.escape(test.split('[')[0])}\b", file.read_text(), re.M)
        )
    if "..." in path or "…" in path:
        return True
    for folder, written in WRITTEN.items():
        if path.startswith(folder) and written in (ROOT / "Makefile").read_text():
            return True
    pattern = PLACEHOLDER.sub("*", path).rstrip("/")
    if "*" in pattern:
        return any(ROOT.glob(pattern.replace("|", "*")))
    return (ROOT / pattern).exists()


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def anchors(page) -> set[str]:
    return {slug(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", page.read_text(), re.M)}


def missing_paths(page, text: str) -> list[str]:
    """Each repository path or link of `text` (read as `page`) that does not exist."""
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        for match in PATH.finditer(line):
            if not path_exists(match[1]):
                found.append(f"{located(page, number)}: no such path {match[1].rstrip('.:')}")
        for target in LINK.findall(line):
            if "://" in target or target.startswith("mailto:"):
                continue
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            if not linked.exists():
                found.append(f"{located(page, number)}: link to a missing file {target}")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                found.append(f"{located(page, number)}: link to a missing heading {target}")
    return found


def makefile_text() -> str:
    """The Makefile's text followed by that of each file it includes."""
    text = (ROOT / "Makefile").read_text()
    return text + "".join((ROOT / name).read_text() for name in re.findall(r"^include (\S+)$", text, re.M))


def make_targets() -> set[str]:
    targets = set()
    for match in re.finditer(r"^([\w.-]+(?:[ \t]+[\w.-]+)*)[ \t]*:(?!=)", makefile_text(), re.M):
        targets.update(match[1].split())
    return targets


def missing_make_targets(page, text: str, targets: set[str]) -> list[str]:
    return [
        f"{located(page, number)}: no make target {match[2]}"
        for number, code in code_units(text)
        for match in MAKE.finditer(code)
        if not fnmatch.filter(targets, match[2])
    ]


def verb_flags() -> dict[str, set[str]]:
    """Each verb's option strings, from its own parser (a built model's verb: its build's)."""
    flags = {}
    for name, verb in VERBS.items():
        parser = argparse.ArgumentParser(add_help=True)
        verb.add_arguments(parser)
        flags[name] = set(parser._option_string_actions)
    for model in BUILT_MODELS.values():
        parser = argparse.ArgumentParser(add_help=True)
        build.add_arguments(parser, model.name)
        flags[model.verb] = set(parser._option_string_actions)
    return flags


def missing_verbs_and_flags(page, text: str, flags: dict[str, set[str]]) -> list[str]:
    found = []
    for number, code in code_units(text):
        for command in re.split(r"&&|;|\||\s#\s|\s--\s|>", code):
            match = KLRL.search(command)
            if not match:
                continue
            verb, rest = match[1], match[2].split()
            if verb not in flags:
                found.append(f"{located(page, number)}: no klrl verb {verb}")
                continue
            for word in rest:
                flag = FLAG.match(word)
                if flag and flag[1].split("=")[0] not in flags[verb] | {"--debug"}:
                    found.append(f"{located(page, number)}: klrl {verb} has no flag {flag[1]}")
    return found


def schema_child(schema: dict, node: dict, key: str) -> dict | None:
    """The schema of `key` under `node`; {} for a free-form value, None when `key` is not allowed."""
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    if node.get("type") == "array":
        return schema_child(schema, node.get("items", {}), key)
    if key in node.get("properties", {}):
        return node["properties"][key]
    if key.startswith("<") and node.get("properties"):  # a placeholder for one of them
        return {}
    extra = node.get("additionalProperties", "properties" not in node)
    if extra is False:
        return None
    names = node.get("propertyNames", {})
    while "$ref" in names:
        names = schema["$defs"][names["$ref"].rsplit("/", 1)[1]]
    if key.startswith("<") or not names.get("pattern") or re.match(names["pattern"], key):
        return extra if isinstance(extra, dict) else {}
    return None


def unknown_keys(schema: dict, node: dict, value, trail: str = "") -> list[str]:
    if isinstance(value, list):
        return [key for item in value for key in unknown_keys(schema, node, item, trail)]
    if not isinstance(value, dict):
        return []
    unknown = []
    for key, item in value.items():
        child = schema_child(schema, node, str(key))
        if child is None:
            unknown.append(f"{trail}{key}")
        else:
            unknown += unknown_keys(schema, child, item, f"{trail}{key}.")
    return unknown


def missing_config_keys(page, text: str, schema: dict) -> list[str]:
    found = []
    for number, code in code_units(text):
        match = DOTTED_KEY.match(code)
        if not match or match[1] not in schema["properties"] or FILE_NAME.search(code):
            continue
        node, keys = schema, [match[1], *match[2].strip(".").split(".")]
        for depth, key in enumerate(keys):
            node = schema_child(schema, node, key)
            if node is None:
                found.append(f"{located(page, number)}: no config key {'.'.join(keys[: depth + 1])}")
                break
    for number, block in yaml_fences(text):
        value = yaml.safe_load(block)
        if isinstance(value, dict) and set(value) <= set(schema["properties"]):
            found += [f"{located(page, number)}: no config key {key}" for key in unknown_keys(schema, schema, value)]
    return found


def snakemake_rules() -> set[str]:
    return {
        name
        for smk in [ROOT / "Snakefile", *(ROOT / "workflow" / "rules").glob("*.smk")]
        for name in re.findall(r"^(?:rule|checkpoint) (\w+):", smk.read_text(), re.M)
    }


def missing_rules(page, text: str, rules: set[str]) -> list[str]:
    found = []
    for number, code in code_units(text):
        for match in RULE_OPTION.finditer(code):
            found += [
                f"{located(page, number)}: no Snakemake rule {name}" for name in match[1].split() if name not in rules
            ]
    for number, line in enumerate(text.split("\n"), 1):
        for match in RULE_NAMED.finditer(line):
            name = next(group for group in match.groups() if group)
            if name not in rules:
                found.append(f"{located(page, number)}: no Snakemake rule {name}")
    return found


def work_words(name: str, text: str) -> list[str]:
    """file:line and what, for each phrase of WORK_WORDS in `text`."""
    return [
        f"{name}:{number}: {what}: {match[0]!r}"
        for number, line in enumerate(text.split("\n"), 1)
        for what, pattern in WORK_WORDS.items()
        for match in pattern.finditer(line)
    ]


def tracked_text_files() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    except FileNotFoundError:  # no git on this machine
        listed = None
    if listed is None or listed.returncode != 0:  # a copy without .git (the release-tarball suite): its files
        return [str(path.relative_to(ROOT)) for path in ROOT.rglob("*") if path.is_file()]
    return [name for name in listed.stdout.split("\0") if name]


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_path_and_link_a_page_names_exists(page):
    assert missing_paths(page, page.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_make_target_verb_flag_config_key_and_rule_a_page_names_exists(page):
    text, schema = page.read_text(), yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    found = missing_make_targets(page, text, make_targets()) + missing_verbs_and_flags(page, text, verb_flags())
    found += missing_config_keys(page, text, schema) + missing_rules(page, text, snakemake_rules())
    assert found == []


def test_no_tracked_file_says_how_the_work_was_scheduled():
    found = []
    for name in tracked_text_files():
        if name == "tests/test_docs.py":  # the word list itself
            continue
        try:
            found += work_words(name, (ROOT / name).read_text())
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary files, and submodules or files deleted in the working tree
    assert found == []


# --- the checks themselves, on planted mistakes


def test_each_check_names_the_file_and_line_of_a_planted_mistake():
    page = ROOT / "docs" / "planted.md"
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    text = "\n".join(
        [
            "Intro.",
            "See `workflow/klrl/nothing.py` and [x](missing.md) and [y](../README.md#no-such-heading).",
            "```bash",
            "make no-such-target",
            "python -m klrl train --no-such-flag 1 \\",
            "    --out DIR",
            "python -m klrl no-such-verb",
            "snakemake --forcerun no_such_rule",
            "```",
            "The key `tracking.no_such_key`, and `tests/<subpackage>/test_<module>.py` exists.",
        ]
    )
    found = missing_paths(page, text) + missing_make_targets(page, text, make_targets())
    found += missing_verbs_and_flags(page, text, verb_flags()) + missing_config_keys(page, text, schema)
    found += missing_rules(page, text, snakemake_rules())
    assert found == [
        "docs/planted.md:2: no such path workflow/klrl/nothing.py",
        "docs/planted.md:2: link to a missing file missing.md",
        "docs/planted.md:2: link to a missing heading ../README.md#no-such-heading",
        "docs/planted.md:4: no make target no-such-target",
        "docs/planted.md:5: klrl train has no flag --no-such-flag",
        "docs/planted.md:7: no klrl verb no-such-verb",
        "docs/planted.md:10: no config key tracking.no_such_key",
        "docs/planted.md:8: no Snakemake rule no_such_rule",
    ]
    yaml_text = "```yaml\nmodels:\n  m:\n    hub: a/b\n    no_such: 1\n```\n"
    assert missing_config_keys(page, yaml_text, schema) == ["docs/planted.md:2: no config key models.m.no_such"]


def test_the_work_words_are_phrases_not_common_words():
    text = 'stop the run\n@pytest.fixture(scope="session")\nissue 17 here\nafter stop 30, in this session at nice 19\n'
    assert work_words("x.py", text) == [
        "x.py:3: a tracker issue number: 'issue 17'",
        "x.py:4: a numbered stop: 'stop 30'",
        "x.py:4: a work session: 'this session'",
        "x.py:4: a nice level: 'nice 19'",
    ]
    assert work_words("y.md", "the second wave of changes; snakemake/snakemake#4166, issue #1340") == [
        "y.md:1: a wave of work: 'wave'"
    ]
