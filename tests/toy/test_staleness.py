"""Off-policy bias against staleness and prefix-IS variance against length, on the exact toy policy."""

import pytest

from klrl.toy.staleness import curve_markdown, horizon_rows, lag_rows


def test_bias_grows_from_zero_with_the_lag_and_prefix_is_stays_unbiased():
    rows = lag_rows([0, 2, 8], problems=2, samples=50, configs=("k1-reward", "k3-loss", "k1-reward-prefixis"))
    by = {(row["config"], row["lag"]): row for row in rows}
    assert by[("k1-reward", 0)]["tv"] == 0.0 and by[("k1-reward", 0)]["rel_bias"] < 1e-10  # lag 0 is on-policy
    assert 0 < by[("k1-reward", 2)]["tv"] < by[("k1-reward", 8)]["tv"] <= 1
    assert 0.1 < by[("k1-reward", 2)]["rel_bias"] < by[("k1-reward", 8)]["rel_bias"]
    assert by[("k3-loss", 8)]["rel_bias"] > 10 * by[("k3-loss", 0)]["rel_bias"]
    assert all(by[("k1-reward-prefixis", lag)]["rel_bias"] < 1e-10 for lag in (0, 2, 8))
    table = curve_markdown(rows, "lag", "rel_bias")
    assert table.splitlines()[0].startswith("| rel_bias \\ lag | 0 (TV 0.00) | 2 (TV ")


@pytest.mark.slow
def test_prefix_weighted_variance_grows_with_length_slower_than_whole_sequence_weighting():
    rows = horizon_rows([1, 4, 8], problems=3, samples=300)
    std = {(row["config"], row["horizon"]): row["rel_std"] for row in rows}
    assert std[("k1-reward-prefixis", 1)] < std[("k1-reward-prefixis", 4)] < std[("k1-reward-prefixis", 8)]
    assert std[("k1-reward-prefixis", 8)] < 0.7 * std[("k1-reward-seqis", 8)]
    assert std[("k1-reward-prefixis", 1)] == pytest.approx(
        std[("k1-reward-seqis", 1)], rel=0.2
    )  # one step: the same weight
