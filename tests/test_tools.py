"""tools/: its README lists every script of the folder with a command that runs it; the CI process
table's sums on lines of dump-acct's; the disk sampler follows a folder up and down."""

import os
import re
import subprocess
import sys

import pytest

from test_benchmarks import folder_scripts, runs_script, table_rows
from test_docs import missing_paths
from workflow_helpers import ROOT, load_benchmark

TOOLS = ROOT / "tools"


def test_the_tools_readme_lists_every_script_of_the_folder_once_and_the_command_that_runs_it():
    rows = table_rows(TOOLS / "README.md")
    names = [row[0].strip("`") for row in rows]
    assert sorted(names) == folder_scripts(TOOLS) and len(names) == len(set(names))
    for script, _what, command, _used in rows:
        assert runs_script(command, script.strip("`"), "tools"), (script, command)
    assert missing_paths(TOOLS / "README.md", (TOOLS / "README.md").read_text()) == []


# dump-acct's lines as Debian's acct 6.6 prints them (user, system and wall time in 1/100 s)
DUMPED = """\
python          |v3|   122.00|    17.00|   131.00|     0|     0|570880.00|     0.00|    8039|    8035|     |       0|__      |Sat Dec  5 00:07:07 2026
jemalloc_bg_thd |v3|   610.00|    90.00|   900.00|     0|     0|990880.00|     0.00|    8040|    8035|     |       0|__      |Sat Dec  5 00:07:08 2026
sleep           |v3|     0.00|     0.00|   100.00|     0|     0|  2920.00|     0.00|    8042|    8035|     |       0|__      |Sat Dec  5 00:07:08 2026
python          |v3|  4000.00|   500.00|  5000.00|     0|     0|990880.00|     0.00|    8044|    8035|     |       0|__      |Sat Dec  5 00:07:09 2026
"""


def test_the_ci_process_table_sums_each_commands_and_each_bands_cpu():
    ci_processes = load_benchmark("ci_processes", folder="tools")
    rows = ci_processes.parse_dump(DUMPED)
    assert [row["cpu"] for row in rows] == pytest.approx([1.39, 7.0, 0.0, 45.0])
    assert ci_processes.by_command(rows) == [
        ("python", 2, pytest.approx(46.39)),
        ("jemalloc_bg_thd", 1, 7.0),
        ("sleep", 1, 0.0),
    ]
    bands = {band: (count, cpu) for band, count, cpu in ci_processes.cpu_bands(rows)}
    assert bands == {
        "0-1 s": (1, 0.0),
        "1-3 s": (1, pytest.approx(1.39)),
        "3-6 s": (0, 0),
        "6-12 s": (1, 7.0),
        "12-60 s": (1, 45.0),
        "60-inf s": (0, 0),
    }
    with pytest.raises(ValueError, match=r"^not a line of dump-acct's: 'python \| v3'$"):
        ci_processes.parse_dump("python | v3")


def test_the_disk_benchmark_follows_a_folder_up_and_down_and_passes_on_the_exit_code(tmp_path):
    watched, samples = tmp_path / "watched", tmp_path / "samples.tsv"
    watched.mkdir()
    script = (
        "import os, sys, time; path = sys.argv[1] + '/blob'; open(path, 'wb').write(os.urandom(3 << 20)); "
        "time.sleep(0.6); os.remove(path); os.link(sys.argv[1] + '/one', sys.argv[1] + '/two'); sys.exit(3)"
    )
    (watched / "one").write_bytes(os.urandom(1 << 20))
    command = [sys.executable, "tools/disk_use.py", "--every", "0.05", "--samples", str(samples)]
    command += ["--watch", str(watched), "--", sys.executable, "-c", script, str(watched)]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 3, out.stderr
    header, *rows = [line.split("\t") for line in samples.read_text().splitlines()]
    assert header == ["seconds", "filesystem growth", str(watched)]
    sizes = [int(row[2]) for row in rows]
    assert sizes[0] == 1 << 20 and max(sizes) == 4 << 20 and sizes[-1] == 1 << 20  # a link counts once
    assert re.search(rf"{re.escape(str(watched))}: peak 0\.00 GiB at \d+ s, 0\.00 GiB at the end", out.stderr)
