"""`klrl ui-screenshots`: the MLflow UI for docs/results.md, two configurations' curves compared.

    python -m klrl ui-screenshots --experiment study \
        --cells tiny__k1-reward__b1__on__s0 tiny__k1-reward__b1__on__s1 tiny__k1-loss__b1__on__s0 tiny__k1-loss__b1__on__s1

serves the run's MLflow store (klrl.tracking.mlflow_process), opens it in headless Chromium (Playwright, the
`test` extra; Debian's chromium: `make browser`) and writes to docs/figures/:
- mlflow_runs.png: the experiment's runs table, opened on the grid's parent run;
- mlflow_curves.png: the metric page plotting --metric against the step for the chosen cells'
  runs, one line per run (the view "Plot chart" opens from the compare page);
- mlflow_compare.png: the compare page of those runs (parameters that differ, final metrics).
`make readme-screenshots` runs it; the UI test runs the same `capture` on the CI grid's store.
Nothing else in the pipeline needs Playwright: it is imported only here.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

from klrl.tracking.runs import read_runs_file

CHROMIUM = "/usr/bin/chromium"  # Debian's package; `make browser` installs it where it can
METRIC = "periodic_eval/pass_at_1"
ASSISTANT_CLOSE = "button[data-component-id='mlflow.assistant.chat_panel.close']"


def _route(page: str, raw: str = "", **query) -> str:
    """A UI route with JSON-valued query parameters (and `raw` ones appended as they are)."""
    return (
        f"#/{page}?" + "&".join(f"{key}={urllib.parse.quote(json.dumps(value))}" for key, value in query.items()) + raw
    )


def _close_assistant(page) -> None:
    """MLflow 3's assistant panel takes a third of the page: closed when it shows."""
    button = page.locator(ASSISTANT_CLOSE)
    if button.count():
        button.first.click()


def capture(address: str, runs_file: Path, cells: list[str], out: Path, metric: str = METRIC) -> list[Path]:
    """The three screenshots of `cells`' runs (runs_file: the grid's runs.json) from the server at
    `address`; each page is waited on until a chosen run's name shows (the runs table: the first;
    the metric and compare pages: the last, whose rows list every run). Returns their paths."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise OSError("ui-screenshots needs Playwright: pip install -e '.[test]'") from None
    if not Path(CHROMIUM).exists():
        raise OSError(f"ui-screenshots needs {CHROMIUM}: `make browser` (apt's chromium)")

    runs = read_runs_file(runs_file)
    missing = [cell for cell in cells if cell not in runs["runs"]]
    if missing:
        raise ValueError(f"{runs_file}: no run for {', '.join(missing)}")
    ids, experiment = [runs["runs"][cell] for cell in cells], runs["experiment_id"]
    out.mkdir(parents=True, exist_ok=True)
    shots = [out / "mlflow_runs.png", out / "mlflow_curves.png", out / "mlflow_compare.png"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{address}/#/experiments/{experiment}/runs")
        parent = page.get_by_text("grid", exact=True)
        parent.wait_for(timeout=120_000)
        page.locator("[role=row]", has=parent).locator("button[data-component-id*=runnamecellrenderer]").click()
        page.get_by_text(cells[0], exact=True).first.wait_for(timeout=60_000)
        _close_assistant(page)
        page.screenshot(path=str(shots[0]))
        page.goto(
            f"{address}/"
            + _route(
                "metric", "&x_axis=step", runs=ids, metric=metric, experiments=[experiment], plot_metric_keys=[metric]
            )
        )
        page.get_by_text(cells[-1]).first.wait_for(timeout=120_000)  # the table under the plot names every run
        page.wait_for_timeout(3000)  # the plot draws after the data arrive
        _close_assistant(page)
        page.screenshot(path=str(shots[1]))
        page.goto(f"{address}/" + _route("compare-runs", runs=ids, experiments=[experiment]))
        page.get_by_text(cells[-1]).first.wait_for(timeout=120_000)
        page.wait_for_timeout(2000)
        _close_assistant(page)
        page.screenshot(path=str(shots[2]), full_page=True)
        browser.close()
    return shots
