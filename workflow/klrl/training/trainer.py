"""RL training of one cell (`klrl train`): on- or off-policy, any KL configuration, resumable.

What runs at each step t, in order:
 1. Prompts: `prompts_per_step` rows of the train split, from a seeded permutation per epoch.
 2. Rollout: G = `group_size` completions per prompt, sampled at `temperature` / `top_p` from
    the behaviour policy μ. On-policy (async_lag k = 0) μ is the current policy. Off-policy μ
    is the policy of step t − k (step 0 while t < k): what an asynchronous actor lagging k
    optimizer steps produces, but deterministic. No stale weights are kept: at step s the
    policy samples the rollout of step s + k (klrl.training.rollout_queue), the learner scores
    log μ of its tokens with the same weights right then, it is graded and queued, and step t
    takes the queued rollout of step t. `generation_backend` hf samples with the policy's
    model itself; vllm with a colocated engine given the policy's weights once per step (sync).
 3. Learning (`klrl.training.step.Learner`, one path for every setting): log-probs of the
    sampled tokens under the policy and the frozen reference πref (the base model) and,
    off-policy, the queued log μ (the learner's own forward of θ_{t−k}, as in the paper); the
    loss of `klrl.objective.loss`: the KL of `klrl.objective.kl.kl_terms` (and nothing else) shapes the reward
    R̃ = R − penalty and/or adds its loss term; advantages from R̃ within each group (RLOO by
    default; Dr. GRPO's R − group mean with `advantage: group-mean`, the paper's off-policy
    choice); the policy term −clamp(πθ/μ, 0, c)·A per token (truncated IS; the ratio is 1
    on-policy), or PPO's clipped objective when `ppo_clip` is set; seq-sum or token-mean
    aggregation. AdamW after gradient-norm clipping, once per minibatch: with ppo_epochs ×
    minibatches > 1 the batch is reused for several updates, the ratio anchored at the
    pre-update policy (on-policy) or at μ (off-policy). `micro_batch_size` splits every
    forward/backward pass into chunks, the gradient accumulated: the same step in less memory.
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
alone writes files and logs to MLflow. Rank 0 alone reads the base model and hands every process
its shards. The off-policy queue holds each process's own rows, and each process writes its own
shards into a checkpoint (the queued rollouts whole, klrl.training.rollout_queue); final/
holds full weights. With `mixed_precision: bf16` (FSDP even in one
process) or `bf16-autocast` the model computes in bfloat16 over float32 master weights
(klrl.training.precision).

Files in the output folder: metrics.jsonl (one line per step), status.json (completed or
diverged, with the step and reason; written atomically after final/), config.yaml (resolved),
checkpoints/step-<n>/ (the last two) while running (klrl.training.checkpoint), final/ (the
trained model and tokenizer). Re-running the same command resumes from the
checkpoint, or does nothing when status.json says the cell is finished; `klrl train` with a
changed configuration first moves the old attempt's files aside (klrl.training.attempt).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from klrl.core.paths import CONFIG, FINAL, METRICS, STATUS
from klrl.grading.rewards import get_reward
from klrl.core.schedule import lr_factor
from klrl.tasks.data import RowLimits, read_split
from klrl.training import distributed
from klrl.training.attempt import write_config
from klrl.training.checkpoint import RefusedCheckpoint, load_checkpoint, remove_checkpoints, save_checkpoint
from klrl.training.config import TrainConfig
from klrl.training.distributed import local_rows
from klrl.training.periodic_eval import pass_at_1
from klrl.training.precision import attention_implementation, forward_precision, hold_frozen_weights
from klrl.training.prompts import PromptSchedule, encode_prompts, stop_token_ids
from klrl.training.rollout_queue import QueuedRollout, queue_layout, queue_state, restore_queue
from klrl.training.sampling import HFSampler, completion_texts
from klrl.training.seeds import seeded_generator
from klrl.training.step import Learner
from klrl.training.record import MetricsLog, NoTracking, RunTracker, read_metrics, write_status
from klrl.grading.verify_worker import grading_counts


MAX_MODEL_ARTIFACT_BYTES = 100 * 2**20  # larger final models are referenced by path in MLflow, not copied


class Trainer:
    def __init__(self, config: TrainConfig, out_dir: Path, tracker: RunTracker | None = None) -> None:
        self.config = config
        self.out_dir = Path(out_dir)
        self.reward_fn = get_reward(config.reward)
        if config.threads:
            torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        self.procs = distributed.setup(config.device, config.mixed_precision)
        self.device = self.procs.device
        self.tracker = tracker if tracker is not None and self.procs.is_main else NoTracking()
        self.rows = self._local_rows()
        self.tokenizer = AutoTokenizer.from_pretrained(config.base_model, revision=config.base_revision)
        source = self._base_model() if self.procs.sharded and self.procs.is_main else None  # rank 0's one host copy
        self.policy = self._model(source, trainable=True)
        self.reference = self._model(source, offload=config.reference_offload)
        del source
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(),
            lr=config.lr,
            weight_decay=config.weight_decay,
            betas=config.adam_betas,
            fused=config.fused_adamw or None,  # None, not False: torch then picks its foreach kernel
        )
        cosine = config.lr_schedule == "cosine"
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, config.warmup_steps, config.steps, cosine)
        )
        train_rows, eval_rows = (
            read_split(
                Path(path),
                config.reward,
                RowLimits(config.max_prompt_tokens, config.max_answer_chars),
                self._count_tokens,
            )
            for path in (config.train_data, config.eval_data)
        )
        self.schedule = PromptSchedule(train_rows, config.prompts_per_step, config.seed)
        self.eval_rows = eval_rows[: config.eval_size]
        stops = stop_token_ids(self.tokenizer, config.base_model, config.stop_tokens, config.base_revision)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else stops[0]
        self.pad_id = pad
        self.sampler = self._make_sampler(stops, pad)
        self.queue: deque[QueuedRollout] = deque()  # the rollouts of steps t … t + k, oldest first
        self.learner = Learner(config, self.policy, self.reference, self.optimizer, self.scheduler, self.procs)
        self.step = 0

    def _count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text).input_ids)

    def _make_sampler(self, stops: tuple[int, ...], pad: int):
        """The rollout backend: `hf` samples with the learner's model, `vllm` with an engine of its own."""
        config = self.config
        if config.generation_backend == "hf":
            broadcast = self.procs.broadcast if self.procs.world > 1 else None
            return HFSampler(
                stops, pad, config.max_new_tokens, config.temperature, config.top_p, broadcast, self.procs.gathered
            )
        from klrl.training.vllm_backend import VLLMEngine, VLLMSampler

        engine = VLLMEngine(
            config.base_model,
            seed=config.seed,
            dtype=config.vllm_dtype,
            memory_fraction=config.vllm_memory_fraction,
            max_model_len=config.vllm_max_model_len,
            processes=self.procs.world,
        )
        return VLLMSampler(engine, stops, pad, config.max_new_tokens, config.temperature, config.top_p)

    def _local_rows(self) -> slice:
        """This process's rows of each batch: its share of the prompt groups."""
        config, world = self.config, self.procs.world
        if config.prompts_per_step % world:
            raise ValueError(
                f"prompts_per_step={config.prompts_per_step} must be a multiple of the {world} processes (each trains on whole prompt groups)"
            )
        if (config.prompts_per_step // world * config.group_size) % config.minibatches:
            raise ValueError(
                f"minibatches={config.minibatches} must divide each of the {world} processes' {config.prompts_per_step // world * config.group_size} rows"
            )
        return local_rows(config.prompts_per_step * config.group_size, config.group_size, self.procs.rank, world)

    def _base_model(self) -> torch.nn.Module:
        config = self.config
        return AutoModelForCausalLM.from_pretrained(
            config.base_model, revision=config.base_revision, dtype=torch.float32
        )

    def _model(self, source: torch.nn.Module | None, trainable: bool = False, offload: bool = False) -> torch.nn.Module:
        """The base model in float32 on this process's device; frozen unless trainable. In
        distributed mode it is built on the meta device and sharded, and rank 0's `source` (the
        base model, read once) gives every process its shards."""
        config = self.config
        if self.procs.sharded:
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(
                    AutoConfig.from_pretrained(config.base_model, revision=config.base_revision), dtype=torch.float32
                )
        else:
            model = self._base_model()
        attention = attention_implementation(config.mixed_precision)
        if attention:
            model.set_attn_implementation(attention)
        if not trainable:
            model.eval().requires_grad_(False)
            if not self.procs.sharded:
                hold_frozen_weights(model, config.mixed_precision)
        elif config.activation_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if not self.procs.sharded:
            return self.procs.shard(model)
        if source is not None:
            model.generation_config = source.generation_config  # what final/ saves
        return self.procs.load_from_main(model, source, config.mixed_precision, offload)

    # ----------------------------------------------------------------- state
    def _model_tensors(self) -> dict:
        """The policy's and the AdamW moments' tensors (this process's shards) and the optimizer's settings."""
        optimizer = self.procs.optimizer_state(self.policy, self.optimizer)
        tensors = {"policy": self.procs.model_state(self.policy), "optimizer": optimizer["state"]}
        return {"tensors": tensors, "param_groups": optimizer["param_groups"]}

    def _training_state(self) -> dict:
        """What a checkpoint holds: the policy and the AdamW moments (each process's shards), the
        queued rollouts (klrl.training.rollout_queue); and the plain values. Collective."""
        model = self._model_tensors()
        queued, queue_plain = queue_state(self.queue, self.procs, self.pad_id)
        plain = {"scheduler": self.scheduler.state_dict(), "param_groups": model["param_groups"], "queue": queue_plain}
        return {"step": self.step, "tensors": model["tensors"] | {"queue": queued}, "plain": plain}

    def _restore(self) -> None:
        """Resume from the newest readable checkpoint, if any (each process reads its own shards)."""

        def layout(plain: dict) -> dict:  # the tensors to read, shaped as this process holds them
            if "queue" not in plain:
                raise RefusedCheckpoint(
                    "written by a klrl that kept the stale weights, before the off-policy lag became a queue of "
                    "rollouts; delete the cell's checkpoints/ to train it again from step 0, or finish it with the klrl that wrote it"
                )
            return self._model_tensors()["tensors"] | {"queue": queue_layout(plain["queue"])}

        state = load_checkpoint(self.out_dir, layout)
        if state is None:
            self.optimizer.state.clear()  # reading the layout made a fresh optimizer's state: start as new
            return
        tensors, plain = state["tensors"], state["plain"]
        self.procs.load_model_state(self.policy, tensors["policy"])
        self.procs.load_optimizer_state(
            self.policy, self.optimizer, {"state": tensors["optimizer"], "param_groups": plain["param_groups"]}
        )
        self.scheduler.load_state_dict(plain["scheduler"])
        self.queue = restore_queue(tensors["queue"], plain["queue"], self.rows)
        self.step = state["step"]

    def _checkpoint(self) -> None:
        """Every process writes its own shards of the training state (klrl.training.checkpoint)."""
        save_checkpoint(self.out_dir, self._training_state(), is_main=self.procs.is_main, barrier=self.procs.barrier)

    # ------------------------------------------------------------------ loop
    def run(self) -> str:
        """Train to the end (or to a divergence); returns the final status."""
        main = self.procs.is_main
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if main:
            write_config(self.out_dir, self.config)
        self._restore()
        path = self.out_dir / METRICS
        old = read_metrics(path) if path.exists() else []
        accuracies = [
            record["rollout/accuracy"] for record in old if record["step"] < self.step and "rollout/accuracy" in record
        ]
        self.procs.barrier()  # every process has read the log before rank 0 rewrites it
        grading_counts()  # from here on, each record counts its own step's grading
        log = MetricsLog(path, keep_steps_below=self.step) if main else None
        if self.step == 0:
            self.tracker.log_params(self.config.params())
        bar = tqdm(
            total=self.config.steps, initial=self.step, desc=self.out_dir.name, mininterval=2.0, disable=not main
        )
        status, reason = "completed", ""
        while self.step < self.config.steps:
            evaluation = {"periodic_eval/pass@1": self.evaluate()} if self._due(self.config.eval_every) else {}
            record = self.train_step() | evaluation | grading_counts()  # timeouts, deadline-zeroed, cache hits
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
            if (
                self.config.checkpoint_every
                and self.step % self.config.checkpoint_every == 0
                and self.step < self.config.steps
            ):
                self._checkpoint()
        bar.close()
        if status == "completed":
            self._log(log, {"step": self.step, "periodic_eval/pass@1": self.evaluate()})
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
        final = self.out_dir / FINAL
        self.policy.save_pretrained(final, state_dict=weights)
        self.tokenizer.save_pretrained(final)
        write_status(self.out_dir, status, self.step, reason)  # after final/: its presence means done
        remove_checkpoints(self.out_dir)
        for name in (METRICS, STATUS, CONFIG):
            self.tracker.log_artifact(self.out_dir / name)
        if sum(path.stat().st_size for path in final.iterdir()) <= MAX_MODEL_ARTIFACT_BYTES:
            self.tracker.log_artifact(final)
        else:
            self.tracker.set_tag("final_model_path", str(final.resolve()))
        self.tracker.finish(status, reason)

    # ------------------------------------------------------------------ step
    def train_step(self) -> dict:
        """Step `self.step`: the queue filled up to step t + k, the learner's update from step
        t's queued rollout; returns the step's metrics (this process's)."""
        start = time.perf_counter()
        last = min(self.step + self.config.async_lag, self.config.steps - 1)
        first = self.queue[-1].step + 1 if self.queue else self.step
        for step in range(first, last + 1):
            self.queue.append(self.sample(step))
        generate = time.perf_counter() - start
        queued = self.queue.popleft()
        learned = self.learner.learn(queued.rollout, queued.rewards, self.step, queued.behaviour_logp)
        return {"step": self.step, "rollout/version": queued.version} | learned | {"time/generate": generate}

    def sample(self, step: int) -> QueuedRollout:
        """The rollout that step `step` learns from, sampled now by the current policy (θ_t, t =
        `self.step`) from that step's prompts with that step's generator: this process's rows,
        graded, and off-policy with the learner's log μ = log θ_t of its tokens."""
        rows = self.schedule.batch(step)
        group = [row for row in rows for _ in range(self.config.group_size)][self.rows]
        prompts = [
            ids for ids in encode_prompts(self.tokenizer, rows) for _ in range(self.config.group_size)
        ]  # a chat template per prompt, not per sample
        self.policy.eval()
        self.sampler.sync(self.policy, self.step)
        with forward_precision(self.config.mixed_precision, self.device):
            rollout = self.sampler.sample(
                self.policy, prompts, seeded_generator(self.config.seed, "rollout", step), self.rows
            )
        texts = completion_texts(self.tokenizer, rollout)
        rewards = torch.tensor(self.reward_fn(texts, [row["answer"] for row in group]), dtype=torch.float32)
        behaviour_logp = self.learner.sampling_logp(rollout) if self.config.async_lag else None
        return QueuedRollout(step, self.step, rollout, behaviour_logp, rewards)

    def close(self) -> None:
        """Release the rollout backend's engine (vLLM's), before the process group goes."""
        self.sampler.close()

    def evaluate(self) -> float:
        """pass@1 of the current policy on the fixed held-out subset, at temperature 1."""
        self.policy.eval()
        sampler = dataclasses.replace(self.sampler, temperature=1.0, top_p=1.0)
        sampler.sync(self.policy, self.step)
        generator = seeded_generator(self.config.seed, "eval")
        with forward_precision(self.config.mixed_precision, self.device):
            return pass_at_1(
                self.policy,
                self.tokenizer,
                sampler,
                self.eval_rows,
                self.reward_fn,
                self.config.eval_samples,
                generator,
            )
