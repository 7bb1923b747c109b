"""What a grid of Hub models costs before it runs (`klrl budget`): per kind of cell and for the
grid, GPU-hours, host memory per node, GPU memory per device, checkpoint bytes, disk, and what
will be downloaded.

The memory and checkpoint formulas of one cell are in `cell_footprint` alone; the time of a step
is its FLOPs (`step_flops`, docs/paper-scale.md's count) at an assumed utilisation of the GPUs'
peak, plus an assumed rollout time in proportion to the completion limit (decoding steps). Every assumption is a constant below, stated in the output.
The evaluation jobs' GPU-hours are their runtimes (an upper bound) and, within them, the KL
measurement of each cell's final policy (`mechanism_seconds`).
An off-policy cell holds the policy (float32 master weights), the frozen reference, AdamW's two
moments and a queue of at most lag + 1 rollouts, no stale weights; its checkpoint is the policy,
the two moments and that queue.
"""

from __future__ import annotations

from dataclasses import dataclass

PEAK_FLOPS = 989e12  # FLOP/s: an H100 SXM's dense bfloat16 peak
UTILISATION = 0.4  # the share of that peak a training step reaches (assumed)
PROMPT_TOKENS = 330  # mean tokens of a prompt with its instruction and chat template (assumed)
COMPLETION_TOKENS = 1000  # mean tokens of a completion, at most max_new_tokens (assumed)
GENERATION_SECONDS = 120  # wall time of a step's rollouts at 4,096 new tokens: the longest completion sets it (assumed)
GENERATION_TOKENS = 4096  # the completion limit GENERATION_SECONDS is for; a step's rollouts scale with its limit
MEMORY_BANDWIDTH = 3.35e12  # bytes/s: an H100 SXM's; a decoding step reads every weight once
ROLLOUT_BYTES_PER_TOKEN = 24  # a queued token: its id and mask (int64), log μ and the engine's log-prob (float32)
GB = 1e9


@dataclass(frozen=True)
class Footprint:
    """One running cell's memory and disk, in bytes."""

    gpu_per_device: int  # weights, gradients and moments before activations and the KV cache
    host_per_node: int  # the peak: loading (rank 0's whole float32 copy, a tensor in flight per rank)
    queue: int  # the queued rollouts (all processes together)
    checkpoint: int
    running_disk: int  # the checkpoints kept, and one more while it is written
    final: int  # final/: the trained model in float32


def cell_footprint(params: int, largest: int, gpus: int, queued: int, rollout_tokens: int, engine: bool) -> Footprint:
    """A cell of a model of `params` parameters (its largest tensor `largest` elements) trained
    on `gpus` devices (FSDP), with `queued` rollouts of `rollout_tokens` tokens waiting (off-policy:
    lag + 1 steps' batches; on-policy: none) and, where `engine`, a colocated vLLM engine per GPU.

    Per device: the policy's float32 weights, gradients and two AdamW moments (16 bytes a
    parameter) and the float32 reference (4), sharded over the GPUs, and the engine's bfloat16
    copy (2) whole. Per node: rank 0 reads the model once in float32 while every rank receives one
    tensor at a time (4 bytes an element); the queue is small beside it. A checkpoint: the policy
    and the two moments (3 × 4 bytes a parameter) and the queue.
    """
    from klrl.training.checkpoint import KEEP

    shards = max(1, gpus)
    queue = queued * rollout_tokens * ROLLOUT_BYTES_PER_TOKEN
    checkpoint = 3 * 4 * params + queue
    return Footprint(
        gpu_per_device=(16 + 4) * params // shards + 2 * params * engine,
        host_per_node=max(4 * params + shards * 4 * largest, queue),
        queue=queue,
        checkpoint=checkpoint,
        running_disk=(KEEP + 1) * checkpoint,
        final=4 * params,
    )


def step_flops(params: int, samples: int, tokens: int, off_policy: bool) -> float:
    """A training step's FLOPs: per token, forwards of the reference and of the policy without
    gradient (2 × 2N), the policy's forward, recomputation and backward (8N), and off-policy the
    learner's forward that scores log μ when the rollout is made (2N)."""
    return (12 + 2 * off_policy) * params * samples * tokens


def mechanism_seconds(params: int, prompts: int, samples: int, batch_size: int, max_new_tokens: int) -> float:
    """GPU seconds of one cell's KL measurement (klrl.evaluation.mechanism): `samples` completions
    of each of `prompts` prompts from the policy and as many from the reference, decoded in batches
    of `batch_size` prompts, each step of a batch's longest completion (max_new_tokens) reading the
    float32 weights once at MEMORY_BANDWIDTH; then every sequence scored by both models. FLOPs:
    2N a token for generation and 2N for each model's scoring forward, at UTILISATION of the peak."""
    sequences = 2 * prompts * samples
    tokens = PROMPT_TOKENS + min(COMPLETION_TOKENS, max_new_tokens)
    flops = 3 * 2 * params * sequences * tokens
    decoding = 2 * -(-prompts // batch_size) * max_new_tokens * 4 * params / MEMORY_BANDWIDTH
    return flops / (PEAK_FLOPS * UTILISATION) + decoding


def rollout_seconds(max_new_tokens: int) -> float:
    """Wall time of a step's rollouts: GENERATION_SECONDS at GENERATION_TOKENS new tokens, in
    proportion to the limit (the longest completion's decoding steps set it)."""
    return GENERATION_SECONDS * max_new_tokens / GENERATION_TOKENS


def node_hours(budget: dict) -> float:
    """Wall hours of the grid on one node with every GPU busy: training and evaluation GPU-hours
    (evaluation at its runtime limit) over the node's GPUs. The GPU leases run one job per free
    GPU, so one-GPU cells fill the node; a job of several GPUs waits for as many free."""
    return (budget["gpu_hours"] + evaluation_gpu_hours(budget)) / budget["gpus_per_node"]


def evaluation_gpu_hours(budget: dict) -> float:
    """The evaluation jobs' GPU-hours at their runtime limits (an upper bound)."""
    return sum(resources["runtime"] / 60 * resources["gpus"] for _, resources in budget["evaluations"])


@dataclass
class Row:
    model: str
    policy: str
    gpus: int
    cells: int = 0
    gpu_hours: float = 0.0
    footprint: Footprint | None = None


def grid_budget(config: dict, gpus_per_node: int) -> dict:
    """The budget of `config`'s grid: rows (one per model and policy mode), evaluation jobs,
    downloads and totals."""
    from klrl.evaluation.harness import BATCH_SIZE, MECHANISM_PROMPTS, MECHANISM_SAMPLES
    from klrl.grid.expansion import base_eval_tasks, eval_job_resources, expand_grid, job_resources, used_tasks
    from klrl.models import get_base_model
    from klrl.models.hub_sizes import hub_size
    from klrl.tasks import get_task

    cells = expand_grid(config)
    evaluation = config["evaluation"]
    measurement = (
        evaluation.get("mechanism_prompts", MECHANISM_PROMPTS),
        evaluation.get("mechanism_samples", MECHANISM_SAMPLES),
        evaluation.get("batch_size", BATCH_SIZE),
    )
    mechanism_hours = 0.0
    rows: dict[tuple, Row] = {}
    models = {}
    for cell in cells.values():
        base = get_base_model(cell.model, config.get("models"))
        if base.build != "hub":
            raise ValueError(f"{cell.model} is built here, not a Hub model: the budget counts Hub models only")
        size = models.setdefault(cell.model, (base.hub_id, hub_size(base.hub_id)))[1]
        train, gpus = cell.train, job_resources(config, cell.model)["gpus"]
        lag = train["async_lag"] if cell.policy == "off" else 0
        policy = f"off, lag {lag}" if cell.policy == "off" else "on"
        samples = train["prompts_per_step"] * train["group_size"]
        tokens = PROMPT_TOKENS + min(COMPLETION_TOKENS, train["max_new_tokens"])
        row = rows.setdefault((cell.model, policy), Row(cell.model, policy, gpus))
        seconds = step_flops(size.params, samples, tokens, cell.policy == "off") / (
            max(1, gpus) * PEAK_FLOPS * UTILISATION
        )
        row.gpu_hours += train["steps"] * (seconds + rollout_seconds(train["max_new_tokens"])) * max(1, gpus) / 3600
        row.cells += 1
        mechanism_hours += mechanism_seconds(size.params, *measurement, train["max_new_tokens"]) / 3600
        longest = train.get("vllm_max_model_len") or PROMPT_TOKENS + train["max_new_tokens"]
        queued = (lag + 1) * samples if cell.policy == "off" else 0
        engine = train.get("generation_backend") == "vllm"
        row.footprint = cell_footprint(size.params, size.largest, gpus, queued, longest, engine)
    evaluations = [(model, eval_job_resources(config, model)) for model in [c.model for c in cells.values()]]
    evaluations += [(model, eval_job_resources(config, model)) for model in base_eval_tasks(cells)]
    data = config.get("data", {})
    datasets = [
        repo
        for task in used_tasks(cells)
        if data.get(task, {}).get("source", get_task(task).source) == "hub"
        for repo in get_task(task).hub
    ]
    running = max(
        (gpus_per_node // max(1, row.gpus)) * row.footprint.running_disk for row in rows.values() if row.footprint
    )
    host = max((gpus_per_node // max(1, row.gpus)) * row.footprint.host_per_node for row in rows.values())
    finals = sum(row.cells * row.footprint.final for row in rows.values())
    downloads = sum(size.download_bytes for _, size in models.values())
    return {
        "rows": list(rows.values()),
        "cells": len(cells),
        "gpu_hours": sum(row.gpu_hours for row in rows.values()),
        "evaluations": evaluations,
        "mechanism": {"gpu_hours": mechanism_hours, "prompts": measurement[0], "samples": measurement[1]},
        "models": models,
        "datasets": list(dict.fromkeys(datasets)),
        "disk": {"finals": finals, "checkpoints": running, "downloads": downloads},
        "gpus_per_node": gpus_per_node,
        "host_per_node": host,
    }


def _gb(count: float) -> str:
    value = count / GB
    return f"{value:,.0f} GB" if value >= 100 else f"{value:.1f} GB" if value >= 1 else f"{count / 1e6:,.0f} MB"


def budget_lines(budget: dict, command: str) -> list[str]:
    """The budget as Markdown: what it assumes, a table of the kinds of cell, the grid's totals."""
    node = budget["gpus_per_node"]
    lines = [
        f"Generated by `{command}`. Assumed: {UTILISATION:.0%} of an H100's {PEAK_FLOPS / 1e12:.0f} TFLOP/s"
        f" (bfloat16, dense) in training, {GENERATION_SECONDS} s of rollouts a step at {GENERATION_TOKENS:,} new"
        f" tokens (in proportion to the limit), {PROMPT_TOKENS} prompt and"
        f" {COMPLETION_TOKENS} completion tokens a sample (at most the limit); one node of {node} GPUs.",
        "",
        "| model | policy | cells | GPUs a job | GPU-hours (training) | host memory a cell | GPU memory a device"
        " | checkpoint | disk a running cell | final model |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in budget["rows"]:
        foot = row.footprint
        lines.append(
            f"| {row.model} | {row.policy} | {row.cells} | {row.gpus} | {row.gpu_hours:,.0f} | {_gb(foot.host_per_node)}"
            f" | {_gb(foot.gpu_per_device)} | {_gb(foot.checkpoint)} | {_gb(foot.running_disk)} | {_gb(foot.final)} |"
        )
    hours, disk, mechanism = budget["gpu_hours"], budget["disk"], budget["mechanism"]
    evaluation_hours = evaluation_gpu_hours(budget)
    lines += [
        "",
        f"The grid: {budget['cells']} cells, {hours:,.0f} GPU-hours of training ({hours / node / 24:,.1f} days on"
        f" one node), {len(budget['evaluations'])} evaluation jobs of one GPU (at most {evaluation_hours:,.0f}"
        f" GPU-hours: their runtime), of which the KL measurement of each cell's final policy takes"
        f" {mechanism['gpu_hours']:,.1f} GPU-hours ({mechanism['prompts']} prompts × {mechanism['samples']} samples"
        f" from the policy and from the reference, scored by both; decoding at {MEMORY_BANDWIDTH / 1e12:.2f} TB/s"
        f" of float32 weights), at most {_gb(budget['host_per_node'])} of host memory on a node at once."
        f" Disk: {_gb(disk['finals'])} of final models, {_gb(disk['checkpoints'])} of"
        f" checkpoints of the cells running at once, {_gb(disk['downloads'])} of downloaded models:"
        f" {_gb(sum(disk.values()))} in all.",
        "",
        f"On one node of {node} GPUs, {node // max(1, min(row.gpus for row in budget['rows']))} jobs at once"
        f" (the GPU leases): {node_hours(budget):,.1f} hours of training and evaluation (evaluation at its"
        f" runtime limit).",
        "",
        "Downloaded before the grid (`klrl fetch`):",
    ]
    for hub_id, size in budget["models"].values():
        gated = ", gated: accept its licence on the Hub, then `hf auth login`" if size.gated else ""
        lines.append(f"- model {hub_id} ({_gb(size.download_bytes)}{gated})")
    lines += [f"- data set {repo}" for repo in budget["datasets"]]
    return lines
