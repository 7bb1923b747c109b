"""The biased KL settings of a grid, listed once each from the registry's claims (klrl.grid.biased_settings),
and `klrl describe --config` printing the same."""

import subprocess
import sys

from klrl.grid.expansion import expand_grid
from klrl.grid.biased_settings import biased_lines, report
from workflow_helpers import load_config


def _config(kls: list[str], policy: list[str], **train) -> dict:
    config = load_config("test")
    config["groups"] = [
        config["groups"][0] | {"name": "g", "kl": kls, "beta": [0.1, 0.2], "policy": policy, "seeds": [0, 1]}
    ]
    config["train"] |= {"async_lag": 3} | train
    return config


def test_each_biased_setting_is_one_line_with_the_gradient_it_estimates():
    lines = biased_lines(
        expand_grid(_config(["none", "k1-reward", "k1-loss", "k3-loss", "k1-reward-prefixis"], ["on", "off"]))
    )
    assert lines == [
        "k1-reward (off-policy, lag 3; 4 cells): biased, the gradient of no named divergence: "
        "β E_μ[Σ_t ω_t (Σ_s δ_s) ∇log πθ(y_t)]: token weights on a sequence penalty",
        "k1-loss (on-policy; 4 cells): does nothing, its KL term's expected gradient is zero: β E[Σ_t ∇log πθ(y_t)] = 0: the penalty is pure noise",
        "k1-loss (off-policy, lag 3; 4 cells): biased, the gradient of no named divergence: β E_μ[Σ_t ∇log πθ(y_t)] ≠ 0: lowers πθ's likelihood of μ's samples",
        "k3-loss (on-policy; 4 cells): biased, estimates the token-forward-kl gradient: "
        "β E[Σ_t (1 − ρ_t) ∇log πθ(y_t)] = β Σ_t ∇KL(πref‖πθ) per prefix",
        "k3-loss (off-policy, lag 3; 4 cells): biased, the gradient of no named divergence: β E_μ[Σ_t (1 − ρ_t) ∇log πθ(y_t)]: tokens drawn from μ, not πθ",
    ]


def test_a_grid_of_unbiased_settings_says_so_and_caveats_name_what_the_claims_exclude():
    assert report(expand_grid(_config(["none", "k1-reward", "k3-both"], ["on"]))).startswith(
        "KL settings: every one of this grid's is unbiased"
    )
    (line,) = biased_lines(
        expand_grid(_config(["k3-loss"], ["on"], loss_aggregation="token-mean", kl={"value_clamp": 10.0}))
    )
    assert line.endswith(
        "[the claim is for seq-sum aggregation and no clamp acting; these cells: token-mean aggregation, value_clamp set]"
    )


def test_describe_config_prints_the_report(repo_root):
    result = subprocess.run(
        [sys.executable, "-m", "klrl", "describe", "--config", "config/paper.yaml"],
        capture_output=True,
        text=True,
        cwd=repo_root,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == report(expand_grid(load_config("paper")))
