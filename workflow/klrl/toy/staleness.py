"""Off-policy bias and variance on the toy policy as functions of staleness and sequence length.

Two curves, both computed with klrl.toy.bias's exact gradients and batch estimates:

  lag curve      for each lag k (μ = πθ k gradient steps ago, `make_problem(lag_steps=k)`), the
                 total variation TV(μ, πθ) = ½ Σ_y |μ(y) − πθ(y)| over whole sequences and each
                 configuration's off-policy rel_bias and rel_std. Off-policy bias is not one
                 number: its size, and the ranking of configurations, change with the distance.
  horizon curve  for each sequence length T at a fixed lag, rel_std of the prefix-weighted K1
                 estimator (Σ_s sg(δ_s)·Π_{t≤s} πθ/μ, `k1-reward-prefixis`) beside the whole-
                 sequence-weighted one (`k1-reward-seqis`). The prefix weighting is per-decision
                 importance sampling (Precup, Sutton and Singh, 2000, "Eligibility traces for
                 off-policy policy evaluation", ICML): unbiased when no clamp acts, with a
                 variance that grows with the sequence length, more slowly than whole-sequence
                 weighting's.
"""

from __future__ import annotations

import torch

from klrl.objective.kl_config import KLConfig
from klrl.objective.estimators import STANDARD_CONFIGS
from klrl.toy.exact import batch_estimates, expected_gradient, per_sequence
from klrl_audit.targets import sequence_kl_gradient
from klrl_audit.toy import ToyProblem, make_problem, total_variation

LAG_COLUMNS = ("config", "lag", "tv", "rel_bias", "rel_std")
HORIZON_COLUMNS = ("config", "horizon", "lag", "tv", "rel_bias", "rel_std")
PREFIX_CONFIGS = ("k1-reward-prefixis", "k1-reward-seqis")


def _off_policy(
    problem: ToyProblem, name: str, samples: int, batch_size: int, generator: torch.Generator
) -> tuple[float, float]:
    """(rel_bias, rel_std) of one configuration's off-policy gradient against ∇KL."""
    true_grad = sequence_kl_gradient(problem).reshape(-1)
    scale = true_grad.norm()
    config = KLConfig.from_name(name, beta=1.0)
    exact = expected_gradient(problem, config, "off").reshape(-1)
    estimates = batch_estimates(per_sequence(problem, config, "off"), samples, batch_size, generator)
    variance = (estimates - exact).square().sum(-1).mean()
    return ((exact - true_grad).norm() / scale).item(), (variance.sqrt() / scale).item()


def _rows(
    points: list[int],
    make,
    configs: tuple[str, ...],
    axis: str,
    problems: int,
    seed: int,
    samples: int,
    batch_size: int,
) -> list[dict]:
    """Per point × configuration, the median over `problems` random toy problems (seeds seed,
    seed + 1, ...) of rel_bias and rel_std, and the median TV."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for point in points:
        results = {name: [] for name in configs}
        tvs = []
        for offset in range(problems):
            problem = make(point, seed + offset)
            tvs.append(total_variation(problem))
            for name in configs:
                results[name].append(_off_policy(problem, name, samples, batch_size, generator))
        for name, values in results.items():
            bias, std = torch.tensor(values).median(0).values.tolist()
            rows.append(
                {"config": name, axis: point, "tv": float(torch.tensor(tvs).median()), "rel_bias": bias, "rel_std": std}
            )
    return rows


def lag_rows(
    lags: list[int],
    vocab: int = 3,
    horizon: int = 4,
    seed: int = 0,
    problems: int = 4,
    samples: int = 1000,
    batch_size: int = 16,
    configs: tuple[str, ...] = tuple(name for name in STANDARD_CONFIGS if name != "none"),
) -> list[dict]:
    """One row per configuration × lag (columns LAG_COLUMNS), medians over `problems` toy problems."""
    return _rows(
        lags,
        lambda lag, s: make_problem(vocab, horizon, s, lag_steps=lag),
        configs,
        "lag",
        problems,
        seed,
        samples,
        batch_size,
    )


def horizon_rows(
    horizons: list[int],
    vocab: int = 2,
    lag: int = 3,
    seed: int = 0,
    problems: int = 4,
    samples: int = 1000,
    batch_size: int = 16,
) -> list[dict]:
    """rel_std and rel_bias (0 up to rounding) of the prefix- and sequence-weighted K1 estimators per length T."""
    rows = _rows(
        horizons,
        lambda horizon, s: make_problem(vocab, horizon, s, lag_steps=lag),
        PREFIX_CONFIGS,
        "horizon",
        problems,
        seed,
        samples,
        batch_size,
    )
    return [row | {"lag": lag} for row in rows]


def curve_markdown(rows: list[dict], axis: str, value: str) -> str:
    """A table with one row per configuration and one column per `axis` value (lag or horizon),
    headed by the total variation at each."""
    points = list(dict.fromkeys(row[axis] for row in rows))
    tv = {row[axis]: row["tv"] for row in rows}
    lines = [
        f"| {value} \\ {axis} | " + " | ".join(f"{p} (TV {tv[p]:.2f})" for p in points) + " |",
        "|---|" + "---|" * len(points),
    ]
    for name in dict.fromkeys(row["config"] for row in rows):
        by_point = {row[axis]: row[value] for row in rows if row["config"] == name}
        lines.append(f"| {name} | " + " | ".join(f"{by_point[p]:.3g}" for p in points) + " |")
    return "\n".join(lines) + "\n"
