"""The suite's own order (tests/conftest.py): the tests marked `longest` are collected first, so
that under `make test`'s two workers the longest file starts at once, beside the rest. Checked on
the order in which this pytest run collected the whole suite (a run given paths collects part of
it, and skips this test)."""

import pytest

MINIATURE = "tests/test_paper_miniature.py::test_the_paper_grid_in_miniature_runs_end_to_end"


def test_the_paper_miniature_is_collected_first_and_every_other_test_keeps_its_place(request, collected_order):
    if request.config.args_source is not pytest.Config.ArgsSource.TESTPATHS:
        pytest.skip("the suite's order is checked by a pytest run that collects the whole suite (no paths given)")
    assert collected_order[0] == MINIATURE
    files = [nodeid.split("::")[0] for nodeid in collected_order[1:]]
    runs = [name for position, name in enumerate(files) if position == 0 or files[position - 1] != name]
    assert len(runs) == len(set(runs)) > 40  # each file's tests together, as collected
    assert "tests/test_paper_miniature.py" not in runs
