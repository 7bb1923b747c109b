"""RL training of one cell (`klrl train`): on- or off-policy, any KL configuration, resumable.

What runs at each step t, in order:
 1. Prompts: `prompts_per_step` rows of the train split, from a seeded permutation per epoch.
 2. Rollout: G = `group_size` completions per prompt, sampled at `temperature` / `top_p` from
    the behaviour policy μ. On-policy (async_lag k = 0) μ is the current policy. Off-policy μ
    holds the weights of step t − k (step 0 while t < k): what an asynchronous actor lagging
    k optimizer steps produces, but deterministic. `generation_backend` hf samples with μ's
    model itself; vllm with a colocated engine that is first given μ's weights (sync).
 3. Scores: the task reward R; log-probs of the sampled tokens under the policy (with
    gradient), the frozen reference πref (the base model) and, off-policy, μ (recomputed by
    the learner from the stale weights, as in the paper).
 4. KL: `klrl.kl.kl_terms` and nothing else. The reward penalty shapes R̃ = R − penalty; the
    advantage is computed from R̃ within each group (RLOO by default; Dr. GRPO's R − group
    mean with `advantage: group-mean`, the paper's off-policy choice).
 5. Loss: `aggregate(policy term + KL loss term)`; the policy term is −clamp(πθ/μ, 0, c)·A
    per token (truncated IS; the ratio is 1 on-policy), or PPO's clipped objective when
    `ppo_clip` is set. AdamW after gradient-norm clipping; with ppo_epochs × minibatches > 1
    the batch is reused for several updates, the ratio anchored at the pre-update policy
    (on-policy) or at μ (off-policy). With `micro_batch_size`, steps 3 and 5 run chunk by
    chunk (scores without gradient, then the gradient accumulated), the same step in less memory.
Departures from the paper: a deterministic lag replaces real asynchrony; the periodic
evaluation uses a fixed subset of the held-out split; the defaults are toy-scale (the paper's
values are in config/paper.yaml).

Distributed mode (`torchrun --nproc_per_node W -m klrl train`, klrl.training.distributed): the
policy, the reference and μ are each sharded with FSDP2 over the W processes, and the batch is
split by whole prompt groups (prompts_per_step must be a multiple of W). With the hf backend
every process samples the whole batch in lockstep (FSDP's forward needs all of them; the same
seeded generator, and rank 0's tokens broadcast at each decoding step); with vllm each process's
engine generates only its share. Each process keeps its own P/W groups for the scores,
the advantages (within a group, so local) and the loss; FSDP averages the gradients, which with
equal shares is the gradient of the whole batch. Metrics are averaged over processes; rank 0
alone writes files and logs to MLflow. The off-policy queue holds each process's own shards;
checkpoints and final/ hold full weights. With `mixed_precision: bf16` (FSDP even in one
process) the model computes in bfloat16 over float32 master weights.

Files in the output folder: metrics.jsonl (one line per step), status.json (completed or
diverged, with the step and reason; written atomically after final/), config.yaml (resolved),
checkpoint.pt and checkpoint.prev.pt while running (klrl.training.checkpoint), final/ (the
trained model and tokenizer). Re-running the same command resumes from the
checkpoint, or does nothing when status.json says the cell is finished.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections import deque
from pathlib import Path

import torch
import yaml
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.kl import kl_terms
from klrl.objectives import advantages, policy_loss_tokens, ppo_loss_tokens
from klrl.rewards import get_reward
from klrl.schedule import lr_factor
from klrl.tasks.data import RowLimits, read_split
from klrl.training import distributed
from klrl.training.checkpoint import load_checkpoint, remove_checkpoints, save_checkpoint
from klrl.training.config import TrainConfig
from klrl.training.distributed import load_local_state, local_rows, local_state
from klrl.training.evaluation import pass_at_1
from klrl.training.prompts import PromptSchedule, encode_prompts
from klrl.training.sampling import HFSampler, Rollout, completion_texts
from klrl.training.scoring import combine_distribution_stats, completion_logits, distribution_stats, token_logp
from klrl.training.tracking import MetricsLog, Tracker, read_metrics, write_status
from klrl.verify_worker import grading_counts


MAX_MODEL_ARTIFACT_BYTES = 100 * 2**20  # larger final models are referenced by path in MLflow, not copied


def _generator(*keys: object) -> torch.Generator:
    """A CPU generator seeded from the keys (e.g. seed and step), the same in every process."""
    digest = hashlib.sha256("/".join(map(str, keys)).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def _cat(parts: list[torch.Tensor | None]) -> torch.Tensor | None:
    """Row-wise concatenation of per-chunk tensors (None stays None: no μ on-policy)."""
    return None if parts[0] is None else torch.cat(parts)


class Trainer:
    def __init__(self, config: TrainConfig, out_dir: Path, tracker: Tracker | None = None) -> None:
        self.config = config
        self.out_dir = Path(out_dir)
        self.kl = config.kl_config()
        self.reward_fn = get_reward(config.reward)
        if config.threads:
            torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        self.procs = distributed.setup(config.device, config.mixed_precision)
        self.device = self.procs.device
        self.tracker = (tracker or Tracker()) if self.procs.is_main else Tracker()
        self.rows = self._local_rows()
        self.tokenizer = AutoTokenizer.from_pretrained(config.base_model)
        self.policy = self._model(trainable=True)
        self.reference = self._model(offload=config.reference_offload)
        self.behaviour = self._model() if config.async_lag else None
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=config.adam_betas
        )
        cosine = config.lr_schedule == "cosine"
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, config.warmup_steps, config.steps, cosine)
        )
        train_rows, eval_rows = (
            read_split(Path(path), config.reward, RowLimits(config.max_prompt_tokens, config.max_answer_chars), self._count_tokens)
            for path in (config.train_data, config.eval_data)
        )
        self.schedule = PromptSchedule(train_rows, config.prompts_per_step, config.seed)
        self.eval_rows = eval_rows[: config.eval_size]
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        self.sampler = self._make_sampler(eos, pad)
        self.history: deque[dict] = deque(maxlen=config.async_lag + 1)  # θ_{t−k} … θ_t (local shards)
        self.step = 0

    def _count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text).input_ids)

    def _make_sampler(self, eos: int, pad: int):
        """The rollout backend: `hf` samples with the learner's model, `vllm` with an engine of its own."""
        config = self.config
        if config.generation_backend == "hf":
            broadcast = self.procs.broadcast if self.procs.world > 1 else None
            return HFSampler(eos, pad, config.max_new_tokens, config.temperature, config.top_p, broadcast)
        from klrl.training.vllm_backend import VLLMEngine, VLLMSampler

        engine = VLLMEngine(
            config.base_model,
            seed=config.seed,
            dtype=config.vllm_dtype,
            memory_fraction=config.vllm_memory_fraction,
            max_model_len=config.vllm_max_model_len,
            processes=self.procs.world,
        )
        return VLLMSampler(engine, eos, pad, config.max_new_tokens, config.temperature, config.top_p)

    def _local_rows(self) -> slice:
        """This process's rows of each batch: its share of the prompt groups."""
        config, world = self.config, self.procs.world
        if config.prompts_per_step % world:
            raise ValueError(f"prompts_per_step={config.prompts_per_step} must be a multiple of the {world} processes (each trains on whole prompt groups)")
        if (config.prompts_per_step // world * config.group_size) % config.minibatches:
            raise ValueError(f"minibatches={config.minibatches} must divide each of the {world} processes' {config.prompts_per_step // world * config.group_size} rows")
        return local_rows(config.prompts_per_step * config.group_size, config.group_size, self.procs.rank, world)

    def _model(self, trainable: bool = False, offload: bool = False) -> torch.nn.Module:
        """The base model in float32 on this process's device, sharded in distributed mode;
        frozen unless trainable."""
        model = AutoModelForCausalLM.from_pretrained(self.config.base_model, dtype=torch.float32)
        if not trainable:
            model.eval().requires_grad_(False)
        elif self.config.activation_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return self.procs.shard(model, self.config.mixed_precision, offload)

    # ----------------------------------------------------------------- state
    def _restore(self) -> None:
        state = load_checkpoint(self.out_dir)
        if state is None:
            return
        self.procs.load_full_state(self.policy, state["policy"])
        self.procs.load_full_optimizer_state(self.policy, self.optimizer, state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.history.clear()
        for weights in state["history"]:  # full weights, sharded through μ's model
            self.procs.load_full_state(self.behaviour, weights)
            self.history.append(local_state(self.behaviour))
        self.step = state["step"]

    def _checkpoint(self) -> None:
        """Full weights and optimizer state, written by rank 0 (every rank takes part)."""
        history = []
        for weights in self.history:  # local shards, gathered through μ's model
            load_local_state(self.behaviour, weights)
            history.append(self.procs.full_state(self.behaviour))
        state = {
            "step": self.step,
            "policy": self.procs.full_state(self.policy),
            "optimizer": self.procs.full_optimizer_state(self.policy, self.optimizer),
            "scheduler": self.scheduler.state_dict(),
            "history": history,
            "data_position": self.schedule.position(self.step),
        }
        if self.procs.is_main:
            save_checkpoint(self.out_dir, state)

    # ------------------------------------------------------------------ loop
    def run(self) -> str:
        """Train to the end (or to a divergence); returns the final status."""
        main = self.procs.is_main
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if main:
            (self.out_dir / "config.yaml").write_text(yaml.safe_dump(self.config.to_dict(), sort_keys=True))
        self._restore()
        path = self.out_dir / "metrics.jsonl"
        old = read_metrics(path) if path.exists() else []
        accuracies = [record["rollout/accuracy"] for record in old if record["step"] < self.step and "rollout/accuracy" in record]
        self.procs.barrier()  # every process has read the log before rank 0 rewrites it
        grading_counts()  # from here on, each record counts its own step's grading
        log = MetricsLog(path, keep_steps_below=self.step) if main else None
        if self.step == 0:
            self.tracker.log_params(self.config.to_dict())
        bar = tqdm(total=self.config.steps, initial=self.step, desc=self.out_dir.name, mininterval=2.0, disable=not main)
        status, reason = "completed", ""
        while self.step < self.config.steps:
            evaluation = {"eval/pass@1": self._evaluate()} if self._due(self.config.eval_every) else {}
            record = self._train_step() | evaluation | grading_counts()  # timeouts, deadline-zeroed, cache hits
            record = {"step": record.pop("step")} | self.procs.mean(record)
            accuracies.append(record["rollout/accuracy"])
            problem = self._divergence(record, accuracies)
            if problem:
                status, reason = "diverged", problem
            else:
                self.step += 1
            self._log(log, record)
            bar.update(0 if problem else 1)
            bar.set_postfix(reward=f"{record['rollout/reward_mean']:.3f}", kl=f"{record['kl/k1']:.3f}")
            if problem:
                break
            if self.config.checkpoint_every and self.step % self.config.checkpoint_every == 0 and self.step < self.config.steps:
                self._checkpoint()
        bar.close()
        if status == "completed":
            self._log(log, {"step": self.step, "eval/pass@1": self._evaluate()})
        self._finish(status, reason)
        return status

    def _log(self, log: MetricsLog | None, record: dict) -> None:
        """A record into metrics.jsonl and MLflow (rank 0 only: elsewhere both are off)."""
        if log is not None:
            log.append(record)
        self.tracker.log_metrics(record, record["step"])

    def _due(self, every: int) -> bool:
        """Whether a periodic action falls on the current step (step 0 always: the base)."""
        return self.step == 0 or (every > 0 and self.step % every == 0)

    def _divergence(self, record: dict, accuracies: list[float]) -> str:
        """Why the cell must stop, or '' to go on. Collapse: over `collapse_window` steps, the
        mean training accuracy fell below `collapse_ratio` × that of the first window."""
        if not all(math.isfinite(record[key]) for key in ("loss/total", "optim/grad_norm")):
            return f"non-finite loss or gradient at step {record['step']}"
        window = self.config.collapse_window
        if window and len(accuracies) >= 2 * window:
            first = sum(accuracies[:window]) / window
            recent = sum(accuracies[-window:]) / window
            if first > 0 and recent < self.config.collapse_ratio * first:
                return f"collapse at step {record['step']}: accuracy {recent:.3f} over the last {window} steps, {first:.3f} at the start"
        return ""

    def _finish(self, status: str, reason: str) -> None:
        weights = self.procs.full_state(self.policy)
        if self.procs.is_main:
            self._save_final(weights, status, reason)
        self.procs.barrier()  # final/ and status.json exist when any process returns

    def _save_final(self, weights: dict, status: str, reason: str) -> None:
        final = self.out_dir / "final"
        self.policy.save_pretrained(final, state_dict=weights)
        self.tokenizer.save_pretrained(final)
        write_status(self.out_dir, status, self.step, reason)  # after final/: its presence means done
        remove_checkpoints(self.out_dir)
        for name in ("metrics.jsonl", "status.json", "config.yaml"):
            self.tracker.log_artifact(self.out_dir / name)
        if sum(path.stat().st_size for path in final.iterdir()) <= MAX_MODEL_ARTIFACT_BYTES:
            self.tracker.log_artifact(final)
        else:
            self.tracker.set_tag("final_model_path", str(final.resolve()))
        self.tracker.finish(failed=status != "completed")

    # ------------------------------------------------------------------ step
    def _rollout(self, rows: list[dict]) -> tuple[Rollout, list[dict]]:
        """This process's rows of the step's rollout, from the actor (θ_t, or θ_{t−k} off-policy)."""
        actor, version = self.policy, self.step
        if self.behaviour is not None:
            self.history.append(local_state(self.policy))
            load_local_state(self.behaviour, self.history[0])
            actor, version = self.behaviour, max(0, self.step - self.config.async_lag)
        group = [row for row in rows for _ in range(self.config.group_size)]
        prompts = encode_prompts(self.tokenizer, [row["prompt"] for row in group])
        actor.eval()
        self.sampler.sync(actor, version)
        rollout = self.sampler.sample(actor, prompts, _generator(self.config.seed, "rollout", self.step), self.rows)
        return rollout, group[self.rows]

    def _train_step(self) -> dict:
        config, timings = self.config, {}
        start = time.perf_counter()
        rollout, group = self._rollout(self.schedule.batch(self.step))
        texts = completion_texts(self.tokenizer, rollout)
        rewards = torch.tensor(self.reward_fn(texts, [row["answer"] for row in group]), dtype=torch.float32)
        timings["time/generate"] = time.perf_counter() - start

        start = time.perf_counter()
        rollout = rollout.apply(lambda tensor: tensor.to(self.device))
        mask = rollout.completion_mask.float()
        self.policy.train()
        n_updates = config.ppo_epochs * config.minibatches
        chunks = self._chunks(mask.shape[0])
        if len(chunks) == 1:
            logp, ref_logp, mu_logp, exact = self._score(rollout, grad=n_updates == 1)
        else:  # micro-batches: scores without gradient here, the gradient chunk by chunk in the update
            scored = [self._score(rollout.apply(lambda tensor: tensor[rows]), grad=False) for rows in chunks]
            logp, ref_logp, mu_logp = (_cat([part[i] for part in scored]) for i in range(3))
            exact = combine_distribution_stats([part[3] for part in scored], [mask[rows] for rows in chunks])
        terms = kl_terms(self.kl, logp, ref_logp, mask, behaviour_logp=mu_logp)
        adv = advantages(rewards.to(self.device) - terms.reward_penalty.float(), config.group_size, config.advantage)
        record = {
            "step": self.step,
            "rollout/reward_mean": rewards.mean().item(),
            "rollout/accuracy": (rewards > 0.5).float().mean().item(),
            "rollout/response_length": mask.sum(-1).mean().item(),
            "rollout/advantage_abs_mean": adv.abs().mean().item(),
            **terms.stats,
            **exact,
            "optim/lr": self.scheduler.get_last_lr()[0],
        }
        if mu_logp is not None:
            ratio = torch.exp(logp.detach() - mu_logp)[mask.bool()]
            record["is/ratio_mean"] = ratio.mean().item()
            record["is/ratio_max"] = ratio.max().item()
            record["is/clamped_frac"] = (ratio > config.ratio_clamp).float().mean().item() if config.ratio_clamp else 0.0
        timings["time/score"] = time.perf_counter() - start

        if n_updates == 1 and len(chunks) == 1:
            losses = self._update(logp, terms.loss_tokens, mu_logp, adv, mask, timings)
        elif n_updates == 1:
            losses = self._update_in_chunks(rollout, chunks, ref_logp, mu_logp, adv, timings)
        else:
            anchor = mu_logp if mu_logp is not None else logp
            losses = self._updates(rollout, ref_logp, anchor, adv, timings)
        if self.device.type == "cuda":  # GiB, peak so far; the maximum over processes
            record["memory/allocated_gib_max"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        return record | losses | timings

    def _chunks(self, rows: int) -> list[slice]:
        """The micro-batches of a batch of `rows` rows (one chunk without micro_batch_size)."""
        size = self.config.micro_batch_size or rows
        return [slice(start, min(start + size, rows)) for start in range(0, rows, size)]

    def _score(self, rollout: Rollout, grad: bool) -> tuple:
        """Log-probs of the sampled tokens under πθ (with gradient if `grad`), πref and μ (None
        on-policy), and the exact distribution statistics of πθ against πref."""
        temperature, tokens = self.config.temperature, rollout.completion_ids
        with torch.no_grad():
            ref_logits = completion_logits(self.reference, rollout, temperature, self.device)
            ref_logp = token_logp(ref_logits, tokens)
            mu_logp = None
            if self.behaviour is not None:
                mu_logp = token_logp(completion_logits(self.behaviour, rollout, temperature, self.device), tokens)
        with torch.enable_grad() if grad else torch.no_grad():
            logits = completion_logits(self.policy, rollout, temperature, self.device)
            logp = token_logp(logits, tokens)
        return logp, ref_logp, mu_logp, distribution_stats(logits, ref_logits, rollout.completion_mask.float())

    def _update_in_chunks(self, rollout, chunks, ref_logp, mu_logp, adv, timings) -> dict:
        """One optimizer step with the gradient accumulated over micro-batches: each chunk's loss
        is its share of the whole batch's, so the step is _update's on the whole batch."""
        start = time.perf_counter()
        batch_mask = rollout.completion_mask.float()
        self.optimizer.zero_grad(set_to_none=True)
        policy_loss = kl_loss = 0.0
        for rows in chunks:
            part = rollout.apply(lambda tensor: tensor[rows])
            mask, anchor = batch_mask[rows], None if mu_logp is None else mu_logp[rows]
            logp = token_logp(completion_logits(self.policy, part, self.config.temperature, self.device), part.completion_ids)
            terms = kl_terms(self.kl, logp, ref_logp[rows], mask, behaviour_logp=anchor)
            policy = self._aggregate(self._policy_term(logp, anchor, adv[rows], mask), mask, batch_mask)
            kl = self._aggregate(terms.loss_tokens, mask, batch_mask)
            (policy + kl).backward()
            policy_loss, kl_loss = policy_loss + policy.item(), kl_loss + kl.item()
        timings["time/backward"] = time.perf_counter() - start
        return self._optimizer_step(policy_loss, kl_loss, timings)

    def _policy_term(self, logp, anchor, adv, mask) -> torch.Tensor:
        anchor = logp.detach() if anchor is None else anchor
        if self.config.ppo_clip is not None:
            return ppo_loss_tokens(logp, anchor, adv, mask, self.config.ppo_clip)
        return policy_loss_tokens(logp, anchor, adv, mask, self.config.ratio_clamp)

    def _update(self, logp, kl_loss_tokens, anchor, adv, mask, timings) -> dict:
        """One optimizer step on the policy term plus the KL loss term; returns loss metrics."""
        start = time.perf_counter()
        policy_tokens = self._policy_term(logp, anchor, adv, mask)
        policy_loss = self._aggregate(policy_tokens, mask)
        kl_loss = self._aggregate(kl_loss_tokens, mask)
        self.optimizer.zero_grad(set_to_none=True)
        (policy_loss + kl_loss).backward()
        timings["time/backward"] = timings.get("time/backward", 0.0) + time.perf_counter() - start
        return self._optimizer_step(policy_loss.item(), kl_loss.item(), timings)

    def _optimizer_step(self, policy_loss: float, kl_loss: float, timings: dict) -> dict:
        """Clip the accumulated gradient and step (unless the loss or gradient is not finite)."""
        start = time.perf_counter()
        loss = policy_loss + kl_loss
        grad_norm = distributed.clip_grad_norm(self.policy, self.config.grad_clip)
        if math.isfinite(loss) and math.isfinite(grad_norm):
            self.optimizer.step()
            self.scheduler.step()
        timings["time/optimizer"] = timings.get("time/optimizer", 0.0) + time.perf_counter() - start
        return {"loss/total": loss, "loss/policy": policy_loss, "loss/kl": kl_loss, "optim/grad_norm": grad_norm}

    def _aggregate(self, loss_tokens: torch.Tensor, mask: torch.Tensor, batch_mask: torch.Tensor | None = None) -> torch.Tensor:
        """This process's loss over the rows of `mask`, a part of the batch `batch_mask` (the
        whole local batch by default), such that summed over the parts and averaged over the
        processes it is the whole batch's: seq-sum divides by the rows of the batch (equal shares
        per process), token-mean by the batch's token count over all processes over their number."""
        batch_mask = mask if batch_mask is None else batch_mask
        total = (loss_tokens * mask).sum()
        if self.config.loss_aggregation == "seq-sum":
            return total / batch_mask.shape[0]
        tokens = batch_mask.sum() if self.procs.world == 1 else self.procs.sum(batch_mask.sum()) / self.procs.world
        return total / tokens.clamp(min=1)

    def _updates(self, rollout, ref_logp, anchor, adv, timings) -> dict:
        """ppo_epochs passes of `minibatches` updates each over the batch; metrics of the last."""
        size = adv.shape[0] // self.config.minibatches
        losses = {}
        for epoch in range(self.config.ppo_epochs):
            order = torch.randperm(adv.shape[0], generator=_generator(self.config.seed, "minibatch", self.step, epoch))
            for index in order.split(size):
                index = index.to(self.device)
                part = rollout.apply(lambda tensor: tensor[index])
                start = time.perf_counter()
                logp = token_logp(completion_logits(self.policy, part, self.config.temperature, self.device), part.completion_ids)
                mask = part.completion_mask.float()
                terms = kl_terms(self.kl, logp, ref_logp[index], mask, behaviour_logp=anchor[index])
                timings["time/score"] += time.perf_counter() - start
                losses = self._update(logp, terms.loss_tokens, anchor[index], adv[index], mask, timings)
        return losses

    def _evaluate(self) -> float:
        """pass@1 of the current policy on the fixed held-out subset, at temperature 1."""
        self.policy.eval()
        sampler = dataclasses.replace(self.sampler, temperature=1.0, top_p=1.0)
        sampler.sync(self.policy, self.step)
        generator = _generator(self.config.seed, "eval")
        return pass_at_1(self.policy, self.tokenizer, sampler, self.eval_rows, self.reward_fn, self.config.eval_samples, generator)
