"""Golden off-policy trajectories: every KL configuration that config/config.yaml runs
off-policy, at lags 1, 2 and 16, in float32 and in bf16-autocast, on the tiny model (CPU,
seed 0, one thread), pinned bit for bit in golden_off_policy.json: each step's metrics and a
digest of the final weights. They were pinned from the trainer that kept the stale weights
themselves (a behaviour model and a queue of lag + 1 copies, 09fd533); the trainer that queues
the stale rollouts instead must reproduce them exactly, since it computes the same numbers from
the same weights with the same kernels, only earlier.

The bits depend on the CPU's kernels, so the pins are kept per kind of CPU (cpu_kind: its
vendor, the vector width torch dispatches to, whether AMX multiplies bfloat16): pinned on an
AMD EPYC with AVX-512 and on an Intel Xeon with AMX, where float32 and bfloat16 trajectories
part from the first update (by 1e-7 and 1e-4 of a loss). A CPU of another kind skips the test,
saying so. A deliberate change of the numerics re-pins this CPU's kind with
`KLRL_REPIN_GOLDEN=1 pytest tests/training/test_golden_off_policy.py`, which drops the other
kinds' pins (the change moves them too: re-pin each on its CPU), and says why."""

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from klrl.training import trainer as trainer_module

from conftest import tiny_config, trained_records

PINS = Path(__file__).with_name("golden_off_policy.json")
KEYS = (
    "loss/total",
    "loss/policy",
    "loss/kl",
    "kl/k1",
    "optim/grad_norm",
    "rollout/reward_mean",
    "is/ratio_mean",
    "is/ratio_max",
)
CONFIGS = (
    "none",
    "k1-reward",
    "k1-loss",
    "k3-reward",
    "k3-loss",
    "k1-reward-prefixis",
)  # config/config.yaml's off-policy groups
LAGS = (1, 2, 16)
PRECISIONS = ("none", "bf16-autocast")
CELLS = {
    f"{kl} lag {lag} {'float32' if precision == 'none' else precision}": (kl, lag, precision)
    for kl in CONFIGS
    for lag in LAGS
    for precision in PRECISIONS
}


def cpu_kind() -> str:
    """What decides the bits of the tiny model's kernels: the CPU's vendor, torch's vector
    width, and AMX (bfloat16 products in tiles) where the CPU has it."""
    cpuinfo = Path("/proc/cpuinfo")
    fields = {}
    for line in (cpuinfo.read_text().split("\n\n")[0] if cpuinfo.exists() else "").splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    amx = " AMX" if "amx_bf16" in fields.get("flags", "").split() else ""
    return f"{fields.get('vendor_id') or 'unknown vendor'} {torch.backends.cpu.get_cpu_capability()}{amx}"


def _parity_reward(completions, references):
    return [float(len(text) % 2) for text in completions]


def weights_digest(folder: Path) -> str:
    """sha256 over the final model's tensors (names sorted, raw bytes): equal only bit for bit."""
    digest = hashlib.sha256()
    for name, tensor in sorted(load_file(folder / "model.safetensors").items()):
        digest.update(name.encode())
        digest.update(tensor.contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def train_cell(base: Path, data: Path, out: Path, kl: str, lag: int, precision: str) -> dict:
    """One off-policy cell (the grid's off-policy recipe: Dr. GRPO advantage, IS cap 8, KL
    clamp 10) for lag + 2 steps, so that its last steps learn from rollouts of θ_1 and θ_2."""
    config = tiny_config(
        base,
        data,
        kl=kl,
        beta=0.0 if kl == "none" else 0.1,
        kl_options=None if kl == "none" else {"value_clamp": 10.0},
        reward="parity",
        steps=lag + 2,
        threads=1,
        seed=0,
        async_lag=lag,
        advantage="group-mean",
        ratio_clamp=8.0,
        mixed_precision=precision,
    )
    records = trained_records(config, out)
    return {
        "metrics": [[record.get(key) for key in KEYS] for record in records],
        "weights": weights_digest(out / "final"),
    }


@pytest.mark.slow  # 36 cells of 3 to 18 steps
def test_off_policy_cells_follow_their_pinned_trajectories_bit_for_bit(tiny_base, arith_data, tmp_path, monkeypatch):
    pins, kind, repin = json.loads(PINS.read_text()), cpu_kind(), bool(os.environ.get("KLRL_REPIN_GOLDEN"))
    if kind not in pins and not repin:
        pytest.skip(f"no golden trajectories pinned on a CPU of this kind ({kind}); pinned on: {', '.join(pins)}")
    monkeypatch.setattr(trainer_module, "get_reward", lambda _: _parity_reward)
    got = {
        cell: train_cell(tiny_base, arith_data, tmp_path / str(index), *settings)
        for index, (cell, settings) in enumerate(CELLS.items())
    }
    if repin:
        pins = {kind: got}
        PINS.write_text(json.dumps(pins, indent=1) + "\n")
    pinned = pins[kind]
    assert sorted(pinned) == sorted(CELLS)
    differing = [cell for cell in CELLS if got[cell] != pinned[cell]]
    assert not differing, {cell: (got[cell], pinned[cell]) for cell in differing[:2]}
    assert all(len(pinned[cell]["metrics"]) == settings[1] + 2 for cell, settings in CELLS.items())
    ratios = [row[KEYS.index("is/ratio_max")] for cell in CELLS for row in pinned[cell]["metrics"]]
    assert any(ratio != 1.0 for ratio in ratios)  # μ ≠ πθ: the cells are really off-policy
