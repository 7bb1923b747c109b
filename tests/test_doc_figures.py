"""No measured time or size is typed into the documentation: in README.md, docs/*.md and
config/README.md, a number with a unit of time or size (ms, s, min, h, seconds, minutes, hours,
kB, MB, MiB, GB, GiB, TB) stands only inside a generated block (`<!-- NAME:begin -->` …
`<!-- NAME:end -->`, which its command writes) or in a link's target, unless it is one of the
settings below (a timeout, a profile's default, a size a check is built to). A measurement lives
in benchmarks/ with its date, machine and command, and a page links to it.

Percentages are not checked: in these pages nearly all are settings (power, significance
levels, interval widths, the thresholds the tests hold the verdict rules to), so such a check
would be mostly its list of exceptions. Each failure is one line naming file:line.
"""

from __future__ import annotations

import re

import pytest

from test_docs import PAGES, ROOT

FIGURE = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:\s?(?:-|–|to)\s?\d[\d,]*(?:\.\d+)?)?\s?"
    r"(?:ms|s|min|h|seconds|minutes|hours|kB|MB|MiB|GB|GiB|TB)(?!\w)"
)
BLOCK = re.compile(r"<!-- ([\w:.-]+):begin -->")
LINK_TARGET = re.compile(r"\]\([^)]*\)")

# Settings, not measurements: per page, the phrases that carry them.
SETTINGS = {
    "README.md": ("within 40 minutes",),  # the size the default grid is built to
    "docs/results.md": ("within 40 minutes",),
    "docs/cluster.md": (
        "4,000 MB, 60 min",  # the SLURM profile's default job resources
        "every 2 s",  # the executor's status query interval
        "≥ 180 s",  # the cluster's MinJobAge it asks for
        "for 60 s",  # the tracking server's password cache
        "about 4 minutes",  # MLflow's retries
    ),
    "docs/components.md": ("100 kB strings",),  # a hostile input of the grading tests
    "docs/audit.md": ("bounds (1 MiB", "shell words, 5 s)"),  # the bounds of reading a launch file
    "docs/contributing.md": ("3 s of CPU",),  # the cost from which a test is marked slow
    "docs/paper-scale.md": (
        "about 8 minutes on one GPU",  # the size of the prepared GPU check
        "40 GB or more of an 80 GB H100",  # the budget's memory against the GPU's
        "3 GB in fp32",  # the logits of one 5,120-token sequence: arithmetic
        "1 to 3 minutes",  # the rollout time the estimate assumes
        "10 s, and the devices",  # the lease's wait between SIGTERM and SIGKILL
    ),
    "docs/reliability.md": ("a 2 s timeout", "a 60 s deadline"),  # the grader's bounds
    "docs/night.md": ("12 hours",),  # the night's bound, which its budget is held to
}


def typed_figures(name: str, text: str) -> list[str]:
    """Each time or size of `text` (the page `name`) outside generated blocks, links and SETTINGS."""
    found, block = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if block:
            block = None if f"<!-- {block}:end -->" in line else block
            continue
        if begin := BLOCK.search(line):
            block = begin[1]
            continue
        line = LINK_TARGET.sub("]", line)
        for phrase in SETTINGS.get(name, ()):
            line = line.replace(phrase, "")
        found += [f"{name}:{number}: a figure typed outside a generated block: '{m[0]}'" for m in FIGURE.finditer(line)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_no_page_types_a_measured_time_or_size(page):
    assert typed_figures(str(page.relative_to(ROOT)), page.read_text()) == []


def test_a_typed_figure_is_named_by_file_and_line_and_settings_blocks_and_links_are_not():
    text = "\n".join(
        [
            "One RL step takes 8.4 s, and a job peaks at 11.2 GB.",
            "<!-- table:study:main:begin -->",
            "Generated: 1 h 38 min on 2 cores.",
            "<!-- table:study:main:end -->",
            "See [the step](../benchmarks/RESULTS.md#smollm2-135ms-rl-step); a 2 s timeout.",
            "It ran in 34 min 22 s, 60-85 s per task; 16 samples at 20 steps.",
        ]
    )
    assert typed_figures("docs/reliability.md", text) == [
        "docs/reliability.md:1: a figure typed outside a generated block: '8.4 s'",
        "docs/reliability.md:1: a figure typed outside a generated block: '11.2 GB'",
        "docs/reliability.md:6: a figure typed outside a generated block: '34 min'",
        "docs/reliability.md:6: a figure typed outside a generated block: '22 s'",
        "docs/reliability.md:6: a figure typed outside a generated block: '60-85 s'",
    ]
    assert typed_figures("docs/other.md", "a 2 s timeout") == [
        "docs/other.md:1: a figure typed outside a generated block: '2 s'"
    ]  # a setting is allowed only on its own page
