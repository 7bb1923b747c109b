"""The suite's own order (tests/conftest.py): the test marked `longest` is collected first, then
the files holding a `slow` test, then the others, each file's tests together, so that under `make
test`'s two workers the longest file starts at once and the quick files come last. Checked on the
order in which this pytest run collected the whole suite (a run given paths collects part of it,
and skips this test)."""

import pytest

MINIATURE = "tests/test_paper_miniature.py::test_the_paper_grid_in_miniature_runs_end_to_end"


def test_the_paper_miniature_is_collected_first_then_the_files_of_slow_tests(request, collected_order):
    if request.config.args_source is not pytest.Config.ArgsSource.TESTPATHS:
        pytest.skip("the suite's order is checked by a pytest run that collects the whole suite (no paths given)")
    assert collected_order[0] == (MINIATURE, True)
    files = [nodeid.split("::")[0] for nodeid, _ in collected_order[1:]]
    runs = [name for position, name in enumerate(files) if position == 0 or files[position - 1] != name]
    assert len(runs) == len(set(runs)) > 40  # each file's tests together
    assert "tests/test_paper_miniature.py" not in runs
    slow_files = {nodeid.split("::")[0] for nodeid, slow in collected_order[1:] if slow}
    holds_slow = [name in slow_files for name in runs]
    assert 10 < holds_slow.count(True) < len(runs) - 10
    assert holds_slow == sorted(holds_slow, reverse=True)  # every file of slow tests before any other
