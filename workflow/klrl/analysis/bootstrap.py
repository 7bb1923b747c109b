"""Uncertainty of a pass@1 mean over seeds and problems: a two-level bootstrap.

A configuration's score is the mean over its seeds of the per-problem pass@1 on one evaluation
set (every seed sees the same problems). Both are random draws: the seeds from the training
randomness, the problems from the task's distribution. Each bootstrap replicate resamples the
seeds with replacement and, independently, the problems with replacement (the same problem
indices for every seed, keeping the pairing), and takes the mean; the interval is the
percentile interval of the replicates. With one seed it is the ordinary bootstrap over problems.
The same resampling of problems pairs a cell with its base model for the change from the base.
"""

from __future__ import annotations

import numpy as np

ITERATIONS = 2000
LEVEL = 0.95


def bootstrap_mean_ci(
    scores: np.ndarray,
    *,
    baseline: np.ndarray | None = None,
    iterations: int = ITERATIONS,
    level: float = LEVEL,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean of `scores` (seeds × problems) minus the mean of `baseline` (problems), if given, and
    its percentile bootstrap interval (lo, hi).

    >>> mean, lo, hi = bootstrap_mean_ci(np.array([[1.0, 0.0, 1.0, 1.0]]))
    >>> mean, lo <= mean <= hi
    (0.75, True)
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or 0 in scores.shape:
        raise ValueError(f"scores: need a non-empty seeds × problems array, got shape {scores.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("scores: NaN or infinite pass@1 values")
    n_seeds, n_problems = scores.shape
    if baseline is not None and np.shape(baseline) != (n_problems,):
        raise ValueError(f"baseline: need {n_problems} per-problem values, got shape {np.shape(baseline)}")
    offset = np.zeros(n_problems) if baseline is None else np.asarray(baseline, dtype=float)
    rng = np.random.default_rng(seed)
    seed_draws = rng.integers(0, n_seeds, size=(iterations, n_seeds))
    problem_draws = rng.integers(0, n_problems, size=(iterations, n_problems))
    # mean over the drawn seeds of the mean over the drawn problems of (score − baseline)
    per_seed_means = (scores[:, problem_draws] - offset[problem_draws]).mean(axis=2)  # seeds × iterations
    replicates = np.take_along_axis(per_seed_means.T, seed_draws, axis=1).mean(axis=1)
    tail = (1 - level) / 2
    lo, hi = np.quantile(replicates, [tail, 1 - tail])
    return float(scores.mean() - offset.mean()), float(lo), float(hi)
