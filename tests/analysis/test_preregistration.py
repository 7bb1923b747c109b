"""klrl.analysis.preregistration and klrl.core.provenance: the plan hashed before the first cell trains, recorded again only
when it changes, compared with what the analysis ran; every commit a run's cells trained at with
their count and dates; both named in the generated blocks of docs/results.md."""

import json
import subprocess
import sys

import pandas as pd
import yaml

from klrl.analysis.tables import aggregate
from klrl.cli import main
from klrl.core.paths import Layout
from klrl.analysis.preregistration import grid_cells, plan_hash, plan_of, record_plan
from klrl.core.provenance import commit_rows

from synthetic_grid import ROOT, write_grid

README = "<!-- claims:syn:begin -->\n<!-- claims:syn:end -->\n<!-- table:syn:variance:begin -->\n<!-- table:syn:variance:end -->\n"


def _readme_results(tables, readme):
    readme.write_text(README)
    main(
        [
            "readme-results",
            "--tables",
            str(tables),
            "--experiment",
            "syn",
            "--doc",
            str(readme),
            "--config",
            "config/config.yaml",
            "--run-time",
            "1 min",
        ]
    )
    return readme.read_text()


def test_the_plan_is_recorded_before_the_cells_and_the_analysis_follows_it(tmp_path):
    tables = write_grid(tmp_path / "grid")
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    expected = plan_hash(plan_of(grid_cells(config)))
    record = json.loads((tables / "plan.json").read_text())
    assert (record["hash"], record["followed"], record["fixed_before_results"]) == (expected, True, True)
    assert [(line["hash"], line["cells_finished"]) for line in record["recorded"]] == [(expected, 0)]
    text = _readme_results(tables, tmp_path / "README.md")
    header = (
        "Cells trained: 21 at `aaaa111` (2026-12-01); 21 at `bbbb222` (2026-12-02). Plan `"
        + expected
        + "` (`klrl plan`), recorded "
    )
    assert text.count(header) == 2  # the claims block and the variance block
    assert "before any cell finished: the analysis followed it. Tests: `klrl.analysis.claims`" in text


def test_a_plan_changed_after_results_is_a_new_plan_and_the_readme_says_the_analysis_did_not_follow_the_first(tmp_path):
    tables = write_grid(tmp_path / "grid")
    root = tables.parent
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    first = json.loads((tables / "plan.json").read_text())["hash"]
    config["groups"][0]["seeds"] = [0, 1, 2]  # a third seed planned after 42 cells finished
    digest, new = record_plan(config, Layout(root))
    assert new and digest != first and record_plan(config, Layout(root)) == (digest, False)
    lines = [json.loads(line) for line in (root / "plans.jsonl").read_text().splitlines()]
    assert [(line["hash"], line["cells_finished"]) for line in lines] == [(first, 0), (digest, 42)]
    aggregate(list(pd.read_csv(tables / "scores.csv")["cell"].unique()), tables, root=root)
    record = json.loads((tables / "plan.json").read_text())
    assert (record["hash"], record["followed"]) == (first, False)
    text = _readme_results(tables, tmp_path / "README.md")
    assert (
        f"Plan `{digest}` (`klrl plan`), recorded {lines[1]['written'][:10]} after 42 cells had finished; earlier plans: "
        f"`{first}` ({lines[0]['written'][:10]}, 0 cells finished): the analysis did not follow it (the analysed cells and "
        f"code give plan `{first}`)."
    ) in text


def test_cells_are_grouped_by_commit_in_the_order_they_finished():
    statuses = [
        {"status": "completed", "commit": "b", "finished": "2026-12-02T01:00:00+00:00"},
        {"status": "diverged", "commit": "a", "finished": "2026-12-01T23:00:00+00:00"},
        {"status": "completed", "commit": "b", "finished": "2026-12-03T01:00:00+00:00"},
        {"status": "completed", "step": 3},
        {"status": "missing", "step": None},
    ]
    assert commit_rows(statuses) == [
        {"commit": "a", "cells": 1, "first_finished": "2026-12-01", "last_finished": "2026-12-01"},
        {"commit": "b", "cells": 2, "first_finished": "2026-12-02", "last_finished": "2026-12-03"},
        {"commit": "unrecorded", "cells": 1, "first_finished": "", "last_finished": ""},
    ]


def test_plan_refuses_a_config_without_an_experiment_in_one_line(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text("groups: []\n")
    assert main(["plan", "--config", str(config)]) == 2
    assert capsys.readouterr().err == (
        "klrl plan: error: plan: the config has no `experiment` (a workflow config, e.g. "
        "config/study.yaml) (--debug for the traceback)\n"
    )


def test_plan_verify_recomputes_each_recorded_hash_from_the_plan_stored_with_it(tmp_path, capsys):
    """plans.jsonl stores each plan beside its hash, with the rows it tests and its family;
    --verify recomputes the hash from what is stored. A stored row changed after hashing, or a
    line that stores no plan, is refused in one line naming the line."""
    root = tmp_path / "results"
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    first, _ = record_plan(config, Layout(root))
    config["groups"][0]["seeds"] = [0, 1, 2]
    second, _ = record_plan(config, Layout(root))
    plans = root / "plans.jsonl"
    stored = [json.loads(line)["plan"] for line in plans.read_text().splitlines()]
    assert stored[0]["rows"][0] == {
        "claim": "k1-loss-worsens-with-beta",
        "model": "tiny",
        "beta": "0.1→1",
        "lag": "",
        "terms": [
            "k1-loss/beta1/on/lag0",
            "k1-loss/beta0.1/on/lag0",
            "k1-reward/beta1/on/lag0",
            "k1-reward/beta0.1/on/lag0",
        ],
    }
    assert stored[0]["family"]["correction"] == "Holm with Shaffer's restriction, over the claims"
    assert "stratified" in stored[0]["family"]["rate rows"]
    assert {(c["name"], c["combine"], c["size"]) for c in stored[0]["claims"]} >= {
        ("k3-reward-collapses", "every", 0.5),
        ("k1-reward-beats-k3-loss-out", "every", 0.08),
    }
    assert len(stored[0]["mechanism_claims"]) == 11
    assert main(["plan", "--verify", str(plans)]) == 0
    rows = len(stored[0]["rows"])
    assert capsys.readouterr().out.splitlines() == [
        f"{plans}:1: plan {first} verifies ({rows} rows)",
        f"{plans}:2: plan {second} verifies ({rows} rows)",
    ]
    assert main(["plan", "--verify", str(root / "plan.json")]) == 0  # the workflow's plan.json: the last plan
    assert capsys.readouterr().out == f"{root / 'plan.json'}: plan {second} verifies ({rows} rows)\n"
    lines = plans.read_text().splitlines()
    tampered = json.loads(lines[1])
    tampered["plan"]["rows"][0]["terms"][0] = "k1-loss/beta3/on/lag0"  # a row other than the one hashed
    plans.write_text(
        "\n".join([lines[0], json.dumps(tampered), json.dumps({"hash": first, "cells_finished": 0})]) + "\n"
    )
    assert main(["plan", "--verify", f"{plans}:1"]) == 0
    capsys.readouterr()
    assert main(["plan", "--verify", f"{plans}:2"]) == 2
    digest = plan_hash(tampered["plan"])
    assert capsys.readouterr().err == (
        f"klrl plan: error: {plans}:2: the stored plan hashes to {digest}, not the recorded {second} "
        "(--debug for the traceback)\n"
    )
    assert main(["plan", "--verify", f"{plans}:3"]) == 2
    assert f"{plans}:3: plan {first} stores no plan to recompute its hash from" in capsys.readouterr().err


def test_plan_verify_checks_the_plans_an_analysis_recorded_as_its_readme_block_names_them(tmp_path, capsys):
    tables = write_grid(tmp_path / "grid")
    analysed = tables / "plan.json"
    assert main(["plan", "--verify", str(analysed)]) == 0
    digest = json.loads(analysed.read_text())["hash"]
    assert capsys.readouterr().out.splitlines()[1].startswith(f"{analysed} (recorded plan 1): plan {digest} verifies (")


def test_the_snakefiles_imports_load_no_scipy():
    """Every Snakemake start (a dry run, a grid, each SLURM job's own Snakemake) imports the
    Snakefile's klrl modules, the plan's among them; scipy.stats would add about a second of CPU
    to each, so the statistics modules import scipy where they use it."""
    files = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    modules = [
        line.split()[1] for path in files for line in path.read_text().splitlines() if line.startswith("from klrl")
    ]
    assert "klrl.analysis.preregistration" in modules
    check = "\n".join([*(f"import {module}" for module in modules), "import sys"])
    check += "\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    loaded = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
