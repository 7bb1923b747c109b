"""`klrl budget` (klrl.grid.run_budget): one Qwen2.5-7B off-policy cell of config/paper.yaml counted
by hand, the figures docs/paper-scale.md and docs/night.md show are the verb's output, and what it
refuses."""

import re

import pytest
from klrl.cli import main as klrl
from klrl.grid.run_budget import grid_budget
from workflow_helpers import ROOT, load_config

# Qwen/Qwen2.5-7B: 7,615,616,512 parameters, its embedding 152,064 × 3,584; the off-policy cells
# of config/paper.yaml: 8 GPUs, lag 10, 32 prompts × 16 samples, 420 steps, sequences of at most
# 5,120 tokens (vllm_max_model_len), rollouts from vLLM.
PARAMS, EMBEDDING = 7_615_616_512, 152_064 * 3_584


def test_a_qwen_7b_lag_10_cell_counted_by_hand():
    budget = grid_budget(load_config("paper"), gpus_per_node=8)
    (row,) = [row for row in budget["rows"] if (row.model, row.policy) == ("qwen2.5-7b", "off, lag 10")]
    queue = 11 * 512 * 5_120 * 24  # lag + 1 batches of rollouts, 24 bytes a token
    assert row.footprint.queue == queue == 692_060_160
    assert row.footprint.checkpoint == 12 * PARAMS + queue == 92_079_458_304  # policy + 2 AdamW moments
    assert row.footprint.running_disk == 3 * row.footprint.checkpoint  # 2 kept, a third while written
    assert row.footprint.host_per_node == 4 * PARAMS + 8 * 4 * EMBEDDING == 47_902_382_080
    assert row.footprint.gpu_per_device == 20 * PARAMS // 8 + 2 * PARAMS == 34_270_274_304
    assert row.footprint.final == 4 * PARAMS
    # a step: 14 N FLOPs a token over 512 × (330 + 1,000) tokens at 40% of 8 × 989 TFLOP/s, plus 120 s
    seconds = 14 * PARAMS * 512 * 1_330 / (8 * 989e12 * 0.4) + 120
    assert row.cells == 6 and row.gpu_hours == pytest.approx(6 * 420 * seconds * 8 / 3600, rel=1e-12)
    assert round(seconds, 1) == 142.9


@pytest.mark.parametrize(
    "name, doc, shown",
    [
        ("paper", "paper-scale.md", "| off, lag 10 | 6 | 8 | 800 | 47.9 GB | 34.3 GB | 92.1 GB | 276 GB |"),
        ("night", "night.md", "8 jobs at once (the GPU leases): 11.1 hours"),
    ],
)
def test_a_docs_budget_block_is_the_verbs_output(name, doc, shown, capsys):
    assert klrl(["budget", "--config", f"config/{name}.yaml"]) == 0
    printed = capsys.readouterr().out
    text = (ROOT / "docs" / doc).read_text()
    block = re.search(rf"<!-- budget:{name}:begin -->\n(.*?)\n<!-- budget:{name}:end -->", text, re.S)
    assert block and block[1] == printed.rstrip("\n")
    assert shown in printed


def test_a_built_model_or_no_gpus_a_node_is_one_line(capsys):
    assert klrl(["budget", "--config", "config/config.yaml"]) == 2
    assert capsys.readouterr().err.strip() == (
        "klrl budget: error: tiny is built here, not a Hub model: the budget counts Hub models only"
        " (--debug for the traceback)"
    )
    assert klrl(["budget", "--config", "config/paper.yaml", "--gpus-per-node", "0"]) == 2
    assert "--gpus-per-node 0 must be at least 1" in capsys.readouterr().err


def test_the_kl_measurement_of_a_qwen_7b_cell_counted_by_hand():
    """config/paper.yaml: 64 prompts × 4 samples from each model, decoded 8 prompts a batch to 4,096
    tokens; every sequence generated once and scored by both models."""
    from klrl.grid.run_budget import mechanism_seconds

    flops = 3 * 2 * PARAMS * 512 * 1_330  # generation and two scoring forwards, 512 sequences of 330 + 1,000 tokens
    decoding = 2 * 8 * 4_096 * 4 * PARAMS / 3.35e12  # 8 batches from each model, float32 weights read each step
    seconds = flops / (989e12 * 0.4) + decoding
    assert mechanism_seconds(PARAMS, 64, 4, 8, 4_096) == pytest.approx(seconds, rel=1e-12)
    assert round(seconds) == 675
