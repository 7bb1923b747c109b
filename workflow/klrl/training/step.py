"""The learner's half of a training step: from a rollout and its rewards to updated weights.

One path for every setting (`Learner.learn`):
 1. score      log-probs of the sampled tokens under πθ (pre-update) and πref, each distinct
               prompt computed once for its G samples (`completion_logits`); off-policy, μ's
               come with the rollout (`sampling_logp`, taken when θ_{t−k} sampled it),
               micro-batch by micro-batch without gradient (with it, and kept, when the step is
               one update of one piece: then the update reuses that forward);
 2. advantages from the penalised rewards, once for the batch (`klrl.objective.loss.penalised_advantages`);
 3. diagnostics once for the batch: every estimator (`klrl.objective.kl.kl_stats`), the exact
               distribution statistics, the importance ratios; where the rollout carries the
               engine's log-probs (vllm), their mismatch with μ and, with `engine_correction`,
               the weights μ/e that multiply both loss terms (`klrl.objective.engine_correction`);
 4. updates    for each of `ppo_epochs` passes, the batch (shuffled when split) in `minibatches`
               minibatches; for each, the gradient of `klrl.objective.loss.update_loss` accumulated over
               its micro-batches of `micro_batch_size` rows, each aggregated over the
               minibatch's denominator (so the sum is the minibatch's loss), then the gradient
               clipped and one AdamW step. The ratio's anchor is μ off-policy and the
               pre-update πθ on-policy (ratio 1 on the first update).
Any combination of micro-batches, epochs, minibatches, lag and FSDP takes this path. Under FSDP
each process learns on its own rows; token-mean divides by the mean over processes of their
token counts, so that FSDP's gradient average is the whole batch's gradient.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from klrl.objective.engine_correction import EngineCorrection, engine_weights
from klrl.objective.kl import kl_stats
from klrl.objective.loss import LossConfig, penalised_advantages, update_loss
from klrl.objective.policy_terms import normaliser
from klrl.training import distributed
from klrl.training.config import TrainConfig
from klrl.training.precision import forward_precision
from klrl.training.sampling import Rollout
from klrl.training.scoring import combine_distribution_stats, completion_logits, distribution_stats, token_logp
from klrl.training.seeds import seeded_generator


def loss_config(config: TrainConfig) -> LossConfig:
    """The loss settings of a training cell."""
    return LossConfig(
        kl=config.kl,
        group_size=config.group_size,
        advantage=config.advantage,
        aggregation=config.loss_aggregation,
        ratio_clamp=config.ratio_clamp,
        ppo_clip=config.ppo_clip,
    )


@dataclass
class Scores:
    """A batch's log-probs at the start of the step (detached) and its exact statistics."""

    logp: torch.Tensor  # (B, T) log πθ before the update
    ref_logp: torch.Tensor  # (B, T) log πref
    behaviour_logp: torch.Tensor | None  # (B, T) log μ, None on-policy
    exact: dict[str, float]  # distribution_stats of πθ against πref
    graph: torch.Tensor | None = None  # logp with its graph, when the step is one update in one piece


class Learner:
    """Updates the policy from rollouts; holds no state of its own between steps."""

    def __init__(self, config: TrainConfig, policy, reference, optimizer, scheduler, procs) -> None:
        self.config, self.loss = config, loss_config(config)
        self.policy, self.reference = policy, reference
        self.optimizer, self.scheduler, self.procs = optimizer, scheduler, procs
        self.device = procs.device

    def learn(
        self, rollout: Rollout, rewards: torch.Tensor, step: int, behaviour_logp: torch.Tensor | None = None
    ) -> dict:
        """One training step's learning on this process's rollout rows, their (B,) rewards and,
        off-policy, the (B, L) log μ of their tokens (`sampling_logp` when they were sampled);
        returns its metrics (losses and gradient norm of the last update)."""
        config, timings = self.config, {}
        start = time.perf_counter()
        rollout = rollout.apply(lambda tensor: tensor.to(self.device))
        if behaviour_logp is not None:
            behaviour_logp = behaviour_logp.to(self.device)
        mask = rollout.completion_mask.float()
        rows = mask.shape[0]
        self.policy.train()
        one_piece = config.ppo_epochs * config.minibatches == 1 and (config.micro_batch_size or rows) >= rows
        scores = self.score(rollout, keep_graph=one_piece, behaviour_logp=behaviour_logp)
        rewards = rewards.to(mask.device)
        adv = penalised_advantages(self.loss, rewards, scores.logp, scores.ref_logp, mask, scores.behaviour_logp)
        record = self.diagnostics(scores, rewards, adv, mask)
        anchor = scores.logp if scores.behaviour_logp is None else scores.behaviour_logp
        weights, engine_record = self.engine_correction(rollout, anchor, mask)
        record |= engine_record
        timings["time/score"] = time.perf_counter() - start
        losses = {}
        for epoch in range(config.ppo_epochs):
            for minibatch in self.minibatches(rows, step, epoch, mask.device):
                losses = self.update(rollout, scores, anchor, adv, mask, minibatch, timings, weights)
        if math.isfinite(losses["loss/total"]) and math.isfinite(losses["optim/grad_norm"]):
            self.scheduler.step()  # once per training step: the schedule counts steps, not updates
        if mask.device.type == "cuda":  # GiB, peak so far
            record["memory/allocated_gib_max"] = torch.cuda.max_memory_allocated(mask.device) / 2**30
        return record | losses | timings

    def score(self, rollout: Rollout, keep_graph: bool, behaviour_logp: torch.Tensor | None = None) -> Scores:
        """The batch's log-probs under πθ and πref, and the exact statistics, computed
        micro-batch by micro-batch (πθ's with its graph kept if `keep_graph`)."""
        parts, masks = [], []
        for part in self.micro_batches(rollout):
            parts.append(self.score_rows(part, keep_graph))
            masks.append(part.completion_mask.float())
        logp, ref_logp = (torch.cat([part[i] for part in parts]) for i in range(2))
        exact = combine_distribution_stats([part[2] for part in parts], masks)
        return Scores(logp.detach(), ref_logp, behaviour_logp, exact, graph=logp if keep_graph else None)

    def micro_batches(self, rollout: Rollout) -> list[Rollout]:
        """The rollout's rows in chunks of `micro_batch_size` (all at once without one)."""
        size = self.config.micro_batch_size or rollout.completion_ids.shape[0]
        rows = rollout.completion_ids.shape[0]
        return [rollout.apply(lambda tensor: tensor[start : start + size]) for start in range(0, rows, size)]

    def score_rows(self, rollout: Rollout, keep_graph: bool) -> tuple:
        tokens = rollout.completion_ids
        with torch.no_grad():
            ref_logits = self.logits(self.reference, rollout)
        with torch.enable_grad() if keep_graph else torch.no_grad():
            logits = self.logits(self.policy, rollout)
        exact = distribution_stats(logits, ref_logits, rollout.completion_mask.float())
        return token_logp(logits, tokens), token_logp(ref_logits, tokens), exact

    @torch.no_grad()
    def sampling_logp(self, rollout: Rollout) -> torch.Tensor:
        """The (B, L) log-probs of the rollout's tokens under the policy as it is now, on the
        CPU: log μ of a rollout it has just sampled for a later step, computed in the
        micro-batches and precision that scoring uses."""
        rollout = rollout.apply(lambda tensor: tensor.to(self.device))
        parts = [
            token_logp(self.logits(self.policy, part), part.completion_ids) for part in self.micro_batches(rollout)
        ]
        return torch.cat(parts).cpu()

    def logits(self, model, rollout: Rollout) -> torch.Tensor:
        """`model`'s float32 logits of the rollout's completion tokens: one call for πθ, πref and μ,
        each distinct prompt computed once unless activation checkpointing (which keeps no cache)
        is on; the forward in the configured precision (klrl.training.precision)."""
        share = not self.config.activation_checkpointing
        with forward_precision(self.config.mixed_precision, self.device):
            return completion_logits(model, rollout, self.config.temperature, self.device, share_prompts=share)

    def diagnostics(self, scores: Scores, rewards: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> dict:
        """The step's metrics before the update, computed once for the batch."""
        record = {
            "rollout/reward_mean": rewards.mean().item(),
            "rollout/accuracy": (rewards > 0.5).float().mean().item(),
            "rollout/response_length": mask.sum(-1).mean().item(),
            "rollout/advantage_abs_mean": adv.abs().mean().item(),
            **kl_stats(self.loss.kl, scores.logp, scores.ref_logp, mask, scores.behaviour_logp),
            **scores.exact,
            "optim/lr": self.scheduler.get_last_lr()[0],
        }
        if scores.behaviour_logp is not None:
            ratio = torch.exp(scores.logp - scores.behaviour_logp)[mask.bool()]
            clamp = self.config.ratio_clamp
            record["is/ratio_mean"] = ratio.mean().item()
            record["is/ratio_max"] = ratio.max().item()
            record["is/clamped_frac"] = (ratio > clamp).float().mean().item() if clamp else 0.0
        return record

    def engine_correction(
        self, rollout: Rollout, trainer_mu: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor | None, dict]:
        """The engine correction's (B, T) weights (None without one) and the engine/ metrics, where
        the rollout carries the engine's log-probs; `trainer_mu` is the trainer's μ (the update's
        anchor: πθ pre-update on-policy)."""
        if rollout.engine_logp is None:
            return None, {}
        name = self.config.engine_correction
        correction = EngineCorrection.from_name(name or "token-truncate", self.config.engine_cap)
        weights, metrics = engine_weights(correction, trainer_mu, rollout.engine_logp, mask)
        if name is None:  # the mismatch alone: no weights, so none was truncated or masked
            return None, {f"engine/{key}": value for key, value in metrics.items() if key != "fraction_corrected"}
        return weights, {f"engine/{key}": value for key, value in metrics.items()}

    def minibatches(self, rows: int, step: int, epoch: int, device: torch.device) -> list[torch.Tensor]:
        """Row indices of each minibatch of one pass: the batch in order when it is not split,
        else a permutation seeded by (seed, step, epoch) cut into `minibatches` equal parts."""
        if self.config.minibatches == 1:
            return [torch.arange(rows, device=device)]
        order = torch.randperm(rows, generator=seeded_generator(self.config.seed, "minibatch", step, epoch))
        return list(order.to(device).split(rows // self.config.minibatches))

    def update(
        self, rollout, scores: Scores, anchor, adv, mask, minibatch: torch.Tensor, timings: dict, weights=None
    ) -> dict:
        """One optimizer step on the minibatch's rows, the gradient accumulated over micro-batches
        (each token's terms multiplied by the engine correction's `weights`, if any)."""
        start = time.perf_counter()
        token_count = None
        if self.procs.world > 1 and self.loss.aggregation == "token-mean":
            token_count = self.procs.sum(mask[minibatch].sum()) / self.procs.world
        denominator = normaliser(mask[minibatch], self.loss.aggregation, token_count)
        self.optimizer.zero_grad(set_to_none=True)
        policy_loss = kl_loss = 0.0
        for rows in minibatch.split(self.config.micro_batch_size or minibatch.numel()):
            if scores.graph is not None:
                logp = scores.graph
            else:
                part = rollout.apply(lambda tensor: tensor[rows])
                logp = token_logp(self.logits(self.policy, part), part.completion_ids)
            row_weights = None if weights is None else weights[rows]
            parts = update_loss(
                self.loss, logp, scores.ref_logp[rows], anchor[rows], adv[rows], mask[rows], denominator, row_weights
            )
            (parts.policy + parts.kl).backward()
            policy_loss, kl_loss = policy_loss + parts.policy.item(), kl_loss + parts.kl.item()
        timings["time/backward"] = timings.get("time/backward", 0.0) + time.perf_counter() - start
        return self.optimizer_step(policy_loss, kl_loss, timings)

    def optimizer_step(self, policy_loss: float, kl_loss: float, timings: dict) -> dict:
        """Clip the accumulated gradient and step (unless the loss or gradient is not finite)."""
        start = time.perf_counter()
        loss = policy_loss + kl_loss
        grad_norm = distributed.clip_grad_norm(self.policy, self.config.grad_clip)
        if math.isfinite(loss) and math.isfinite(grad_norm):
            self.optimizer.step()
        timings["time/optimizer"] = timings.get("time/optimizer", 0.0) + time.perf_counter() - start
        return {"loss/total": loss, "loss/policy": policy_loss, "loss/kl": kl_loss, "optim/grad_norm": grad_norm}
