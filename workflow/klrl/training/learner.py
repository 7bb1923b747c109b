"""The learner: from the actor's batch to updated weights, one path for every setting.

`Learner.learn(batch)`:
 1. score      log πθ (pre-update) and log πref of the sampled tokens, micro-batch by
               micro-batch (klrl.training.scoring.Forward) without gradient (with it, and kept,
               when the step is one update of one piece: the update then reuses that forward);
               the anchor a of the ratio is the batch's log μ off-policy, log πθ on-policy;
 2. advantages from the penalised rewards, once for the batch (`klrl.objective.loss.penalised_advantages`);
 3. diagnostics once for the batch, from the step's log ratio: every estimator
               (`klrl.objective.kl.kl_stats`), the exact distribution statistics, the importance
               ratios; where the rollout carries the engine's log-probs (vllm), their mismatch
               with a and, with `engine_correction`, the weights a/e that multiply both loss
               terms (`klrl.objective.engine_correction`);
 4. updates    for each of `ppo_epochs` passes, the batch (shuffled when split) in `minibatches`
               minibatches; for each, the gradient of `klrl.objective.loss.update_loss`
               accumulated over its micro-batches, each with its log ratio against a
               (`klrl.objective.kl.importance_log_ratio`, computed once per forward) and over the
               minibatch's denominator (so the parts sum to the minibatch's loss), then the
               gradient clipped and one AdamW step.
Under FSDP each process learns on its own rows; token-mean divides by the mean over processes
of their token counts, so that FSDP's gradient average is the whole batch's gradient. Its state
in a checkpoint: the policy, the AdamW moments and settings, the scheduler.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from klrl.core.schedule import lr_factor
from klrl.objective.engine_correction import EngineCorrection, engine_weights
from klrl.objective.kl import importance_log_ratio, kl_stats
from klrl.objective.loss import LossConfig, penalised_advantages, update_loss
from klrl.objective.policy_terms import normaliser
from klrl.training import distributed
from klrl.training.config import TrainConfig
from klrl.training.rollout_queue import Batch
from klrl.training.sampling import Rollout
from klrl.training.scoring import Forward, combine_distribution_stats, distribution_stats, token_logp
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
class Scored:
    """A batch on the learner's device with what every update of the step reads (constants)."""

    rollout: Rollout
    mask: torch.Tensor  # (B, T) float completion mask
    ref_logp: torch.Tensor  # (B, T) log πref
    anchor_logp: torch.Tensor  # (B, T) the ratio's anchor a: log μ off-policy, pre-update log πθ on-policy
    advantages: torch.Tensor  # (B,)
    weights: torch.Tensor | None  # (B, T) the engine correction's, None without one
    graph: torch.Tensor | None  # log πθ with its graph, when the step is one update in one piece


class Learner:
    """Updates the policy from the actor's batches; owns the optimizer and its schedule."""

    def __init__(self, config: TrainConfig, policy, reference, procs, forward: Forward) -> None:
        self.config, self.loss = config, loss_config(config)
        self.policy, self.reference, self.procs, self.forward = policy, reference, procs, forward
        self.optimizer = torch.optim.AdamW(
            policy.parameters(),
            lr=config.lr,
            weight_decay=config.weight_decay,
            betas=config.adam_betas,
            fused=config.fused_adamw or None,  # None, not False: torch then picks its foreach kernel
        )
        cosine = config.lr_schedule == "cosine"
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, config.warmup_steps, config.steps, cosine)
        )

    def learn(self, batch: Batch) -> dict:
        """One training step's learning on this process's rows of `batch`; returns its metrics
        (diagnostics, the losses and gradient norm of the last update, timings)."""
        config, start = self.config, time.perf_counter()
        rollout = batch.rollout.apply(lambda tensor: tensor.to(self.forward.device))
        mask = rollout.completion_mask.float()
        rewards = batch.rewards.to(mask.device)
        n_rows = mask.shape[0]
        self.policy.train()
        one_piece = config.ppo_epochs * config.minibatches == 1 and (config.micro_batch_size or n_rows) >= n_rows
        logp, ref_logp, exact, graph = self.score(rollout, keep_graph=one_piece)
        off_policy = batch.behaviour_logp is not None
        anchor_logp = batch.behaviour_logp.to(mask.device) if off_policy else logp
        advantages = penalised_advantages(self.loss, rewards, logp, ref_logp, mask)
        log_ratio = importance_log_ratio(logp, anchor_logp) if off_policy else None  # the step's, before any update
        record = self.diagnostics(logp, ref_logp, exact, log_ratio, rewards, advantages, mask)
        weights, engine_record = self.engine_correction(rollout, anchor_logp, mask)
        record |= engine_record
        scored = Scored(rollout, mask, ref_logp, anchor_logp, advantages, weights, graph)
        timings = {"time/score": time.perf_counter() - start, "time/backward": 0.0, "time/optimizer": 0.0}
        losses = {}
        for epoch in range(config.ppo_epochs):
            for minibatch in self.minibatches(n_rows, batch.step, epoch, mask.device):
                losses, seconds = self.update(scored, minibatch)
                timings = {key: timings[key] + seconds.get(key, 0.0) for key in timings}
        if math.isfinite(losses["loss/total"]) and math.isfinite(losses["optim/grad_norm"]):
            self.scheduler.step()  # once per training step: the schedule counts steps, not updates
        if mask.device.type == "cuda":  # GiB, peak so far
            record["memory/allocated_gib_max"] = torch.cuda.max_memory_allocated(mask.device) / 2**30
        return record | losses | timings

    def score(self, rollout: Rollout, keep_graph: bool) -> tuple:
        """The batch's (B, T) log πθ (detached) and log πref, the exact statistics, and log πθ
        with its graph if `keep_graph` (else None), micro-batch by micro-batch."""
        logps, ref_logps, stats, masks = [], [], [], []
        for index in self.forward.micro_batches(
            torch.arange(rollout.completion_ids.shape[0], device=self.forward.device)
        ):
            part = rollout.apply(lambda tensor: tensor[index])
            with torch.no_grad():
                ref_logits = self.forward.logits(self.reference, part)
            with torch.enable_grad() if keep_graph else torch.no_grad():
                logits = self.forward.logits(self.policy, part)
            masks.append(part.completion_mask.float())
            stats.append(distribution_stats(logits, ref_logits, masks[-1]))
            logps.append(token_logp(logits, part.completion_ids))
            ref_logps.append(token_logp(ref_logits, part.completion_ids))
        logp = torch.cat(logps)
        return (
            logp.detach(),
            torch.cat(ref_logps),
            combine_distribution_stats(stats, masks),
            logp if keep_graph else None,
        )

    def diagnostics(self, logp, ref_logp, exact, log_ratio, rewards, advantages, mask) -> dict:
        """The step's metrics before the update, computed once for the batch, with the `exact`
        distribution statistics; `log_ratio` is log πθ/μ off-policy, None on-policy (no
        importance ratios to report)."""
        record = {
            "rollout/reward_mean": rewards.mean().item(),
            "rollout/accuracy": (rewards > 0.5).float().mean().item(),
            "rollout/response_length": mask.sum(-1).mean().item(),
            "rollout/advantage_abs_mean": advantages.abs().mean().item(),
            **kl_stats(self.loss.kl, logp, ref_logp, mask, log_ratio),
            **exact,
            "optim/lr": self.scheduler.get_last_lr()[0],
        }
        if log_ratio is not None:
            ratio = torch.exp(log_ratio)[mask.bool()]
            clamp = self.config.ratio_clamp
            record["is/ratio_mean"] = ratio.mean().item()
            record["is/ratio_max"] = ratio.max().item()
            record["is/clamped_frac"] = (ratio > clamp).float().mean().item() if clamp else 0.0
        return record

    def engine_correction(self, rollout: Rollout, anchor_logp, mask) -> tuple[torch.Tensor | None, dict]:
        """The engine correction's (B, T) weights (None without one) and the engine/ metrics, where
        the rollout carries the engine's log-probs; `anchor_logp` is the learner's log μ."""
        if rollout.engine_logp is None:
            return None, {}
        name = self.config.engine_correction
        correction = EngineCorrection.from_name(name or "token-truncate", self.config.engine_cap)
        weights, metrics = engine_weights(correction, anchor_logp, rollout.engine_logp, mask)
        if name is None:  # the mismatch alone: no weights, so none was truncated or masked
            return None, {f"engine/{key}": value for key, value in metrics.items() if key != "fraction_corrected"}
        return weights, {f"engine/{key}": value for key, value in metrics.items()}

    def minibatches(self, n_rows: int, step: int, epoch: int, device: torch.device) -> list[torch.Tensor]:
        """Row indices of each minibatch of one pass: the batch in order when it is not split,
        else a permutation seeded by (seed, step, epoch) cut into `minibatches` equal parts."""
        if self.config.minibatches == 1:
            return [torch.arange(n_rows, device=device)]
        order = torch.randperm(n_rows, generator=seeded_generator(self.config.seed, "minibatch", step, epoch))
        return list(order.to(device).split(n_rows // self.config.minibatches))

    def update(self, scored: Scored, minibatch: torch.Tensor) -> tuple[dict, dict]:
        """One optimizer step on the minibatch's rows, the gradient accumulated over its
        micro-batches: the losses and gradient norm, and the seconds of each phase."""
        start = time.perf_counter()
        mask = scored.mask
        token_count = None
        if self.procs.world > 1 and self.loss.aggregation == "token-mean":
            token_count = self.procs.sum(mask[minibatch].sum()) / self.procs.world
        denominator = normaliser(mask[minibatch], self.loss.aggregation, token_count)
        self.optimizer.zero_grad(set_to_none=True)
        policy_loss = kl_loss = 0.0
        for index in self.forward.micro_batches(minibatch):
            if scored.graph is not None:
                logp = scored.graph
            else:
                part = scored.rollout.apply(lambda tensor: tensor[index])
                logp = token_logp(self.forward.logits(self.policy, part), part.completion_ids)
            parts = update_loss(
                self.loss,
                logp,
                scored.ref_logp[index],
                importance_log_ratio(logp, scored.anchor_logp[index]),
                scored.advantages[index],
                mask[index],
                denominator,
                None if scored.weights is None else scored.weights[index],
            )
            (parts.policy + parts.kl).backward()
            policy_loss, kl_loss = policy_loss + parts.policy.item(), kl_loss + parts.kl.item()
        backward = time.perf_counter()
        loss = policy_loss + kl_loss
        grad_norm = distributed.clip_grad_norm(self.policy, self.config.grad_clip)
        if math.isfinite(loss) and math.isfinite(grad_norm):
            self.optimizer.step()
        seconds = {"time/backward": backward - start, "time/optimizer": time.perf_counter() - backward}
        losses = {"loss/total": loss, "loss/policy": policy_loss, "loss/kl": kl_loss, "optim/grad_norm": grad_norm}
        return losses, seconds

    # ----------------------------------------------------------------- state
    def tensors(self) -> dict:
        """The policy's and the AdamW moments' tensors (this process's shards) and the optimizer's
        settings; makes a fresh optimizer's state to read into."""
        optimizer = self.procs.optimizer_state(self.policy, self.optimizer)
        tensors = {"policy": self.procs.model_state(self.policy), "optimizer": optimizer["state"]}
        return {"tensors": tensors, "param_groups": optimizer["param_groups"]}

    def state(self) -> dict:
        """Its part of a checkpoint: {"tensors": policy and optimizer, "plain": scheduler and the
        optimizer's settings}."""
        held = self.tensors()
        return {
            "tensors": held["tensors"],
            "plain": {"scheduler": self.scheduler.state_dict(), "param_groups": held["param_groups"]},
        }

    def restore(self, tensors: dict, plain: dict) -> None:
        """Its part of a checkpoint, as `state` gave it, read into the policy, optimizer and scheduler."""
        self.procs.load_model_state(self.policy, tensors["policy"])
        self.procs.load_optimizer_state(
            self.policy, self.optimizer, {"state": tensors["optimizer"], "param_groups": plain["param_groups"]}
        )
        self.scheduler.load_state_dict(plain["scheduler"])
