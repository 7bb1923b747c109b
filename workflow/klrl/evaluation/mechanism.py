"""The KL a trained policy really attains: exact sequence-level divergences of the final policy π
from the reference πref on held-out prompts of its training task, beside its reward and the
stated objective J_β = reward − β·KL(π‖πref).

On the first `prompts` problems of the task's test split, `samples` completions per prompt are
drawn as the trainer draws them (klrl.training.sampling's HFSampler, the prompt through the
model's chat template exactly as klrl.training.prompts encodes it, the training temperature and
max_new_tokens, the base model's stop tokens), at top-p 1: π is softmax(logits / temperature)
over the whole vocabulary, the distribution the trainer's KL terms are computed on
(klrl.training.scoring). For each sampled sequence, the exact per-prefix sums from the full
softmax at every prefix (klrl.training.scoring's `token_divergences` and `prefix_sums`, the one
implementation the trainer's `exact/` metrics use):

  kl_reverse  y ~ π:    Σ_t KL(π(·|y<t) ‖ πref(·|y<t))
  kl_forward  y ~ πref: Σ_t KL(πref(·|y<t) ‖ π(·|y<t))
  entropy     y ~ π:    Σ_t H(π(·|y<t))
  reward      y ~ π:    the task's reward (the grader training uses)

By the chain rule each sum's expectation is the sequence-level quantity (of sequences cut at
max_new_tokens, as the trainer's are), so each mean is an unbiased estimate of it. Standard
errors cluster a prompt's samples: the SE is that of the per-prompt means over prompts
(sample SD with ddof 1, over √prompts); `objective_se` is that of the per-prompt values of
reward − β·kl_reverse (paired: both from the same samples). With one prompt there is no SE
(None). The measurement is deterministic given its seed: π's and πref's samples come from two
generators seeded from it (klrl.training.seeds).

Memory: a scoring forward holds both models' (rows, length, vocabulary) float32 logits, so rows
are scored in chunks of at most LOGITS_BUDGET elements each (one row at least).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import torch

from klrl.evaluation.results_files import MECHANISM_KEYS
from klrl.training.prompts import encode_prompts
from klrl.training.sampling import HFSampler, Rollout, completion_texts
from klrl.training.scoring import completion_logits, prefix_sums, token_divergences
from klrl.training.seeds import seeded_generator

LOGITS_BUDGET = 2**28  # float32 logits elements of one model in one scoring chunk (1 GiB)


@torch.no_grad()
def rollout_sums(model, other, rollout: Rollout, temperature: float) -> dict[str, torch.Tensor]:
    """Per sequence of `rollout`, the exact per-prefix sums `kl` = Σ_t KL(model‖other)(·|y<t) and
    `entropy` = Σ_t H(model)(·|y<t) of the distributions at `temperature`: (sequences,) float64
    each, scored in chunks of rows within LOGITS_BUDGET."""
    rows, length = rollout.completion_ids.shape
    vocabulary = model.get_output_embeddings().weight.shape[0]
    chunk = max(1, LOGITS_BUDGET // max(1, length * vocabulary))
    sums: dict[str, list[torch.Tensor]] = {"kl": [], "entropy": []}
    for start in range(0, rows, chunk):
        part = rollout.apply(lambda tensor: tensor[start : start + chunk])
        logits = completion_logits(model, part, temperature)
        divergences = token_divergences(logits, completion_logits(other, part, temperature, device=logits.device))
        mask = part.completion_mask.to(logits.device)
        sums["kl"].append(prefix_sums(divergences["kl_pq"], mask).cpu())
        sums["entropy"].append(prefix_sums(divergences["entropy_p"], mask).cpu())
    return {name: torch.cat(parts).double() for name, parts in sums.items()}


def sampled_sums(
    model, other, sampler: HFSampler, prompts: list[list[int]], generator: torch.Generator, batch_rows: int
) -> tuple[dict[str, torch.Tensor], list[Rollout]]:
    """Samples y ~ `model` of each prompt (token ids, in generation batches of `batch_rows`
    sequences) and scores them (`rollout_sums`, at the sampler's temperature): the sums in
    prompt order, and the rollouts."""
    rollouts = [
        sampler.sample(model, prompts[start : start + batch_rows], generator)
        for start in range(0, len(prompts), batch_rows)
    ]
    parts = [rollout_sums(model, other, rollout, sampler.temperature) for rollout in rollouts]
    return {name: torch.cat([part[name] for part in parts]) for name in ("kl", "entropy")}, rollouts


def mean_and_se(per_prompt: torch.Tensor) -> tuple[float, float | None]:
    """The mean of per-prompt values and its standard error over prompts (None with one prompt)."""
    mean = per_prompt.mean().item()
    if len(per_prompt) < 2:
        return mean, None
    return mean, per_prompt.std(correction=1).item() / math.sqrt(len(per_prompt))


@torch.no_grad()
def measure(
    policy,
    reference,
    tokenizer,
    rows: list[dict],
    reward_fn: Callable[[list[str], list], list[float]],
    sampler: HFSampler,
    *,
    beta: float,
    samples: int,
    seed: int,
    batch_size: int,
) -> dict:
    """The per-prompt means of kl_reverse, kl_forward, entropy, reward and objective over
    `samples` completions of each row's prompt, each as its mean and `_se`, with `prompts`,
    `samples` and `beta` (without `task` and `seconds`: `measure_models` adds them); generation
    in batches of `batch_size` prompts."""
    prompts = [ids for ids in encode_prompts(tokenizer, rows) for _ in range(samples)]
    policy_sums, rollouts = sampled_sums(
        policy, reference, sampler, prompts, seeded_generator(seed, "mechanism", "policy"), batch_size * samples
    )
    reference_sums, _ = sampled_sums(
        reference, policy, sampler, prompts, seeded_generator(seed, "mechanism", "reference"), batch_size * samples
    )
    texts = [text for rollout in rollouts for text in completion_texts(tokenizer, rollout)]
    rewards = torch.tensor(reward_fn(texts, [row["answer"] for row in rows for _ in range(samples)]))
    per_prompt = {
        "kl_reverse": policy_sums["kl"],
        "kl_forward": reference_sums["kl"],
        "entropy": policy_sums["entropy"],
        "reward": rewards.double(),
    }
    per_prompt = {name: values.reshape(len(rows), samples).mean(-1) for name, values in per_prompt.items()}
    per_prompt["objective"] = per_prompt["reward"] - beta * per_prompt["kl_reverse"]
    summary: dict = {"prompts": len(rows), "samples": samples, "beta": beta}
    for name, values in per_prompt.items():
        summary[name], summary[f"{name}_se"] = mean_and_se(values)
    return summary


def measure_models(
    model: str,
    reference: str,
    task: str,
    data_dir: Path,
    *,
    beta: float,
    prompts: int,
    samples: int,
    temperature: float,
    max_new_tokens: int,
    device: str = "cpu",
    seed: int = 0,
    batch_size: int = 64,
    reference_revision: str | None = None,
    stop_tokens: tuple[str, ...] = (),
    mixed_precision: str = "none",
) -> dict:
    """results.json's "mechanism" of the model folder `model` against the base `reference`
    (folder or Hub id) on the first `prompts` problems of `task`'s test split (all of them when
    it has fewer), on `device`, in the precision the cell trained in: float32, or under
    `bf16-autocast` both models' linear products in bfloat16 (each model's linear weights held in
    bfloat16, the values autocast casts them to, so π = πref measures exactly 0; attention, norms
    and the softmax in float32), the distributions the trainer's KL terms were computed on. The
    tokenizer, stop tokens and padding are the base's, as in training."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from klrl.grading.rewards import get_reward
    from klrl.tasks import get_task
    from klrl.tasks.data import read_split
    from klrl.training.precision import attention_implementation, forward_precision, hold_frozen_weights
    from klrl.training.prompts import stop_token_ids

    for name, value in (("prompts", prompts), ("samples", samples), ("max_new_tokens", max_new_tokens)):
        if value < 1:
            raise ValueError(f"mechanism {name}: {value} must be at least 1")
    if not temperature > 0:
        raise ValueError(f"mechanism temperature: {temperature} must be above 0 (sampled, as in training)")
    if beta < 0:
        raise ValueError(f"beta: {beta} must be at least 0")
    start = time.perf_counter()
    reward = get_task(task).reward
    rows = read_split(Path(data_dir) / task / "test.jsonl", reward)[:prompts]
    tokenizer = AutoTokenizer.from_pretrained(reference, revision=reference_revision)
    stops = stop_token_ids(tokenizer, reference, stop_tokens, reference_revision)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    attention = attention_implementation(mixed_precision)
    models = [
        AutoModelForCausalLM.from_pretrained(path, revision=revision, dtype=torch.float32).to(device).eval()
        for path, revision in ((model, None), (reference, reference_revision))
    ]
    for loaded in models:
        if attention:
            loaded.set_attn_implementation(attention)
        hold_frozen_weights(loaded, mixed_precision)
    sampler = HFSampler(stops, pad, max_new_tokens, temperature)
    with forward_precision(mixed_precision, torch.device(device)):
        summary = measure(
            *models,
            tokenizer,
            rows,
            get_reward(reward),
            sampler,
            beta=beta,
            samples=samples,
            seed=seed,
            batch_size=batch_size,
        )
    del models
    if device.startswith("cuda"):
        torch.cuda.empty_cache()  # the memory lm-eval's backend loads into next
    summary |= {"task": task, "seconds": time.perf_counter() - start}
    return {key: summary[key] for key in MECHANISM_KEYS}
