"""`make ui` (`klrl ui`): the address it prints opens the config's experiment on its runs table
in a fresh browser profile, not MLflow 3's GenAI overview; without runs it says so in one line."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from klrl.cli import main as klrl
from klrl.tracking.experiment import track_grid
from klrl.reports.mlflow_screenshots import CHROMIUM
from klrl.tracking.mlflow_process import free_port

CELL = "tiny__k1-reward__b0.1__on__s0"


def _config(tmp_path: Path, store: str) -> Path:
    path = tmp_path / "ui.yaml"
    path.write_text(yaml.safe_dump({"experiment": "ui-link", "tracking": {"uri": store}}))
    return path


def test_ui_without_a_store_says_to_run_the_grid_first(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert klrl(["ui", "--config", str(_config(tmp_path, f"sqlite:///{tmp_path}/none.db"))]) == 2
    assert f"sqlite:///{tmp_path}/none.db: no store yet (run the grid first: make run)" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("KLRL_REQUIRE_BROWSER"),
    reason="Debian's chromium is not installed (CI sets KLRL_REQUIRE_BROWSER=1 and installs it)",
)
def test_the_printed_address_opens_the_runs_table_in_a_fresh_profile(tmp_path, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    store = f"sqlite:///{tmp_path}/mlflow.db"
    track_grid("ui-link", store, [CELL], tmp_path / "runs.json", {CELL: "on-policy"})
    command = [
        sys.executable,
        "-m",
        "klrl",
        "ui",
        "--config",
        str(_config(tmp_path, store)),
        "--port",
        str(free_port()),
    ]
    ui = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        printed = ui.stdout.readline()
        assert printed.startswith("MLflow UI: http://127.0.0.1:"), printed
        address = printed.split()[2]
        assert address.endswith(
            f"/#/experiments/{yaml.safe_load((tmp_path / 'runs.json').read_text())['experiment_id']}/runs"
        )
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch_persistent_context(
                str(tmp_path / "profile"), executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page()
            page.goto(address)
            # the runs table: its run-name cells, the first the grid's parent run (its cell folded under it)
            parent = page.get_by_text("grid", exact=True)
            page.locator("[role=row]", has=parent).locator("button[data-component-id*=runnamecellrenderer]").wait_for(
                timeout=120_000
            )
            # the tab's label may render after the rows on a loaded machine: waited for, not polled once
            expect(page.get_by_text("Training runs", exact=True)).to_be_visible(timeout=60_000)
            assert "/runs" in page.url
            browser.close()
    finally:
        os.killpg(ui.pid, signal.SIGINT)
        assert ui.wait(timeout=60) == 0
