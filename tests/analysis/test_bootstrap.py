"""klrl.analysis.bootstrap: the two-level bootstrap's coverage and width."""

import numpy as np
import pytest

from klrl.analysis.bootstrap import bootstrap_mean_ci


def test_bootstrap_interval_covers_a_known_mean_at_its_level():
    """Single seed, 150 problems with pass@1 ~ Bernoulli(0.3): the 95% interval covers 0.3 in about
    95% of 400 independent data sets, and its width matches the normal approximation."""
    rng = np.random.default_rng(1)
    covered, widths = 0, []
    for repeat in range(400):
        data = (rng.random((1, 150)) < 0.3).astype(float)
        mean, lo, hi = bootstrap_mean_ci(data, iterations=1000, seed=repeat)
        covered += lo <= 0.3 <= hi
        widths.append(hi - lo)
    assert 0.91 <= covered / 400 <= 0.98
    assert np.mean(widths) == pytest.approx(2 * 1.96 * np.sqrt(0.3 * 0.7 / 150), rel=0.1)


def test_bootstrap_widens_with_seed_to_seed_variation():
    rng = np.random.default_rng(2)
    problems = rng.random(100)
    same = np.stack([problems, problems, problems])
    spread = np.stack([problems, np.clip(problems + 0.3, 0, 1), np.clip(problems - 0.3, 0, 1)])
    _, lo_same, hi_same = bootstrap_mean_ci(same)
    _, lo_spread, hi_spread = bootstrap_mean_ci(spread)
    assert hi_spread - lo_spread > 1.5 * (hi_same - lo_same)
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_mean_ci(np.array([[0.5, np.nan]]))
