"""Gradient bias and variance of every KL configuration on the toy policy (`klrl toy-bias`).

For each configuration and mode (on: samples from πθ; off: from the stale μ):
    rel_bias     ‖E[ĝ] − ∇KL‖ / ‖∇KL‖, with E[ĝ] and ∇KL (the sequence-level reverse-KL
                 gradient) computed exactly by enumeration;
    variance     E‖ĝ − E[ĝ]‖² (trace of the covariance) of ONE batch estimate ĝ made of
                 `batch_size` sampled sequences (default 16) with RLOO advantages, measured
                 over `samples` independent batches; rel_std = √variance / ‖∇KL‖;
    mc_rel_bias  the same bias measured from the Monte Carlo mean, which converges to rel_bias;
    lag, tv      the distance the off-policy numbers are for: μ is πθ `lag` gradient steps ago,
                 at total variation `tv` over whole sequences (klrl.toy.staleness gives the
                 curves over lags, and over sequence lengths for the prefix-weighted estimator).
Gradients are divided by β, so β does not matter (no clamps act on the toy).
"""

from __future__ import annotations

import csv
from pathlib import Path

import torch

from klrl.objective.estimators import STANDARD_CONFIGS
from klrl.objective.gradient_claims import describe
from klrl.objective.kl_config import KLConfig
from klrl.toy.exact import batch_estimates, expected_gradient, per_sequence
from klrl_audit.targets import SAMPLING, sequence_kl_gradient
from klrl_audit.toy import make_problem, total_variation

LAG_STEPS = 3  # the staleness of μ behind πθ that the table's off-policy numbers are for

COLUMNS = (
    "config",
    "mode",
    "target",
    "unbiased",
    "rel_bias",
    "variance",
    "rel_std",
    "mc_rel_bias",
    "lag",
    "tv",
    "batch_size",
    "samples",
    "vocab",
    "horizon",
    "seed",
)


def toy_rows(vocab: int = 3, horizon: int = 4, seed: int = 0, samples: int = 4000, batch_size: int = 16) -> list[dict]:
    """One row per (configuration, mode), with the columns in COLUMNS."""
    problem = make_problem(vocab, horizon, seed, lag_steps=LAG_STEPS)
    tv = total_variation(problem)
    true_grad = sequence_kl_gradient(problem).reshape(-1)
    scale = true_grad.norm()
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for name in STANDARD_CONFIGS:
        config = KLConfig.from_name(name, beta=0.0 if name == "none" else 1.0)
        claims = describe(config)
        for mode in SAMPLING:
            exact = expected_gradient(problem, config, mode).reshape(-1)
            estimates = batch_estimates(per_sequence(problem, config, mode), samples, batch_size, generator)
            variance = (estimates - exact).square().sum(-1).mean()
            rows.append(
                {
                    "config": name,
                    "mode": mode,
                    "target": claims[mode].target,
                    "unbiased": claims[mode].unbiased,
                    "rel_bias": ((exact - true_grad).norm() / scale).item(),
                    "variance": variance.item(),
                    "rel_std": (variance.sqrt() / scale).item(),
                    "mc_rel_bias": ((estimates.mean(0) - true_grad).norm() / scale).item(),
                    "lag": LAG_STEPS,
                    "tv": tv,
                    "batch_size": batch_size,
                    "samples": samples,
                    "vocab": vocab,
                    "horizon": horizon,
                    "seed": seed,
                }
            )
    return rows


def write_csv(rows: list[dict], path: Path, columns: tuple[str, ...] = COLUMNS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def markdown_summary(rows: list[dict]) -> str:
    """The table of docs/audit.md: relative bias and standard deviation per configuration and mode."""
    by_key = {(row["config"], row["mode"]): row for row in rows}
    lines = ["| config | rel_bias on | rel_bias off | rel_std on | rel_std off |", "|---|---|---|---|---|"]
    for name in dict.fromkeys(row["config"] for row in rows):
        if name == "none":
            continue
        on, off = by_key[(name, "on")], by_key[(name, "off")]
        lines.append(
            f"| {name} | {on['rel_bias']:.3f} | {off['rel_bias']:.3f} | {on['rel_std']:.2f} | {off['rel_std']:.2f} |"
        )
    return "\n".join(lines) + "\n"
