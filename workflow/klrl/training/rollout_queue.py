"""The off-policy lag as a queue of rollouts, and its place in a checkpoint.

With lag k the rollout that step t learns from is the one θ_{t−k} samples from batch(t)'s
prompts with step t's generator (θ_0 while t ≤ k). Nothing of it depends on later weights, so
the actor (klrl.training.actor) samples it as soon as θ_{t−k} exists: at step s it samples the
rollout of step s + k with the current policy θ_s, scores log μ = log θ_s of its tokens with the
learner's forward right then (the weights and kernels a stale copy of θ_s would use later),
grades it, and queues it; at step 0 it samples those of steps 0 … k. Step t then takes the
oldest queued batch, which is step t's. The queue holds at most k + 1 rollouts (k between steps) and no
weights: the engine only ever holds the current policy. On-policy (k = 0) a rollout is
sampled and consumed within its step.

A checkpoint (klrl.training.checkpoint) holds the queued rollouts whole: each process's rows
are gathered, padded to the widest process's prompt and completion (prompts on the left,
completions on the right), so every process holds and saves the same tensors and DCP keeps one
copy. Their plain values (`queue_plain`) give each rollout's step, the version that sampled it,
its fields' dtypes and every writing process's widths, so that a process reading them takes its
own rows at the widths it had (under another process count, at the widest of the writers whose
rows it now holds).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, fields as dataclass_fields

import torch

from klrl.training.sampling import Rollout

LEFT_PADDED = ("prompt_ids", "prompt_mask")  # the prompt's fields; the other row fields are the completion's
ROLLOUT_FIELDS = tuple(field.name for field in dataclass_fields(Rollout))


@dataclass
class Batch:
    """What the actor hands the learner: a rollout, graded, sampled ahead of the step that
    learns from it (this process's rows, on the CPU)."""

    step: int  # the training step that learns from it
    version: int  # the optimizer step of the policy that sampled it: μ = θ_version
    rollout: Rollout  # with the engine's log-probs of θ_version where an engine sampled it
    behaviour_logp: (
        torch.Tensor | None
    )  # (B, L) the learner's log μ of the tokens, taken at step `version`; None on-policy
    rewards: torch.Tensor  # (B,)

    def fields(self) -> dict[str, torch.Tensor]:
        """Its tensors by name (those it has)."""
        named = vars(self.rollout) | {"behaviour_logp": self.behaviour_logp, "rewards": self.rewards}
        return {name: tensor for name, tensor in named.items() if tensor is not None}


def _pad(name: str, tensor: torch.Tensor, prompt: int, completion: int, pad_id: int) -> torch.Tensor:
    """The field widened to the given prompt / completion width, with padding of its kind."""
    if tensor.dim() == 1:
        return tensor
    width = prompt if name in LEFT_PADDED else completion
    extra = width - tensor.shape[1]
    value = pad_id if name.endswith("_ids") else 0
    padding = tensor.new_full((tensor.shape[0], extra), value)
    return torch.cat([padding, tensor] if name in LEFT_PADDED else [tensor, padding], dim=1)


def _trim(name: str, tensor: torch.Tensor, prompt: int, completion: int) -> torch.Tensor:
    if tensor.dim() == 1:
        return tensor
    return tensor[:, tensor.shape[1] - prompt :] if name in LEFT_PADDED else tensor[:, :completion]


def queue_state(queue: deque[Batch], procs, pad_id: int) -> tuple[dict, list[dict]]:
    """The queue as checkpoint tensors (every rollout's fields, all processes' rows) and plain
    values. Collective: every process calls it."""
    tensors, plain = {}, []
    for index, queued in enumerate(queue):
        fields = queued.fields()
        mine = torch.tensor([fields["prompt_ids"].shape[1], fields["completion_ids"].shape[1]])
        widths = procs.gather_rows(mine[None].to(procs.device)).cpu().tolist()
        prompt, completion = (max(width[axis] for width in widths) for axis in (0, 1))
        tensors[str(index)] = {
            name: procs.gather_rows(_pad(name, tensor, prompt, completion, pad_id).to(procs.device)).cpu()
            for name, tensor in fields.items()
        }
        plain.append(
            {
                "step": queued.step,
                "version": queued.version,
                "widths": widths,
                "shapes": {name: list(tensor.shape) for name, tensor in tensors[str(index)].items()},
                "dtypes": {name: str(tensor.dtype).removeprefix("torch.") for name, tensor in fields.items()},
            }
        )
    return tensors, plain


def queue_layout(plain: list[dict]) -> dict:
    """Tensors shaped as `queue_state` saved them, to read a checkpoint's queue into."""
    return {
        str(index): {
            name: torch.empty(shape, dtype=getattr(torch, entry["dtypes"][name]))
            for name, shape in entry["shapes"].items()
        }
        for index, entry in enumerate(plain)
    }


def restore_queue(tensors: dict, plain: list[dict], share: slice) -> deque[Batch]:
    """This process's rows (`share` of the whole batch) of the saved queue."""
    queue = deque()
    for index, entry in enumerate(plain):
        fields = tensors[str(index)]
        batch, writers = fields["rewards"].shape[0], len(entry["widths"])
        per_writer = batch // writers
        holders = range(share.start // per_writer, -(-share.stop // per_writer))  # the writers of these rows
        prompt, completion = (max(entry["widths"][writer][axis] for writer in holders) for axis in (0, 1))
        mine = {name: _trim(name, tensor[share], prompt, completion) for name, tensor in fields.items()}
        rollout = Rollout(**{name: mine.get(name) for name in ROLLOUT_FIELDS})
        queue.append(Batch(entry["step"], entry["version"], rollout, mine.get("behaviour_logp"), mine["rewards"]))
    return queue
