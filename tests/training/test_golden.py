"""Golden trajectories: per-step loss, KL and reward of one on-policy and one off-policy cell on
the tiny model (CPU, seed 0, one thread), pinned to the values this code produced. A numerics
change that every code path shares (the equivalence tests cannot see it) shows here. If a
deliberate change moves them, re-pin with the values the failure prints, and say why."""

import pytest

from klrl.training import trainer as trainer_module

from conftest import tiny_config, trained_records

KEYS = ("loss/total", "kl/k1", "rollout/reward_mean")
CELLS = {
    "on-policy k1-reward": {"kl": "k1-reward", "beta": 0.1},
    "off-policy k3-loss, lag 2": {
        "kl": "k3-loss",
        "beta": 0.1,
        "async_lag": 2,
        "advantage": "group-mean",
        "ratio_clamp": 8.0,
    },
}
GOLDEN = {  # [loss/total, kl/k1, rollout/reward_mean] at steps 0-4
    "on-policy k1-reward": [
        [0.12500005960464478, 0.0, 0.25],
        [-0.06345373392105103, -0.0014744848012924194, 0.375],
        [-0.11140217632055283, -0.017377138137817383, 0.375],
        [0.013021748512983322, 0.09729935228824615, 0.1875],
        [4.470348358154297e-08, 0.4788692593574524, 0.3125],
    ],
    "off-policy k3-loss, lag 2": [
        [0.09375, 0.0, 0.25],
        [0.00948486290872097, -0.07421962916851044, 0.375],
        [-0.18355004768818617, -0.14812225103378296, 0.375],
        [-0.005172066390514374, -0.11125600337982178, 0.125],
        [-0.06104053556919098, -0.6055272221565247, 0.25],
    ],
}


def _parity_reward(completions, references):
    return [float(len(text) % 2) for text in completions]


@pytest.mark.parametrize("cell", list(CELLS))
def test_golden_trajectory(tiny_base, arith_data, tmp_path, monkeypatch, cell):
    monkeypatch.setattr(trainer_module, "get_reward", lambda _: _parity_reward)
    config = tiny_config(tiny_base, arith_data, reward="parity", steps=5, threads=1, seed=0, **CELLS[cell])
    records = trained_records(config, tmp_path)
    trajectory = [[r[key] for key in KEYS] for r in records]
    print(cell, trajectory)
    assert len(trajectory) == len(GOLDEN[cell])
    for step, (got, pinned) in enumerate(zip(trajectory, GOLDEN[cell])):
        assert got == pytest.approx(pinned, rel=1e-4, abs=1e-6), (step, got, pinned)
