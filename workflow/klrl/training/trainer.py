"""RL training of one cell (`klrl train`): the models, the loop, the files; resumable.

`Trainer` builds the policy and the frozen reference πref (the base model; in distributed mode
sharded with FSDP2 over the torchrun processes, klrl.training.distributed), and hands them to an
actor (klrl.training.actor: sampling, grading, the off-policy queue) and a learner
(klrl.training.learner: the update). Each step reads `batch = actor.take(step);
metrics = learner.learn(batch)`. With `mixed_precision: bf16` (FSDP even in one process) or
`bf16-autocast` the model computes in bfloat16 over float32 master weights (klrl.training.precision).
Under torchrun each process trains on its share of whole prompt groups; metrics are averaged
over processes; rank 0 alone reads the base model, writes files and logs to MLflow.

Files in the output folder: metrics.jsonl (one line per step), status.json (completed or
diverged, with the step and reason; written atomically after final/), config.yaml (resolved),
checkpoints/step-<n>/ (the last two: the learner's and the actor's state,
klrl.training.checkpoint) while running, final/ (the trained model and tokenizer). Re-running
the same command resumes from the checkpoint, or does nothing when status.json says the cell is
finished; `klrl train` with a changed configuration first moves the old attempt's files aside
(klrl.training.attempt). Departures from the paper: a deterministic lag replaces real
asynchrony; the periodic evaluation uses a fixed subset of the held-out split; the defaults are
toy-scale (the paper's values are in config/paper.yaml).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from klrl.core.paths import CONFIG, FINAL, METRICS, STATUS
from klrl.grading.rewards import get_reward
from klrl.tasks.data import RowLimits, read_split
from klrl.training import distributed
from klrl.training.actor import Actor, make_sampler
from klrl.training.attempt import write_config
from klrl.training.checkpoint import RefusedCheckpoint, load_checkpoint, remove_checkpoints, save_checkpoint
from klrl.training.config import TrainConfig
from klrl.training.distributed import local_share
from klrl.training.learner import Learner
from klrl.training.precision import attention_implementation, hold_frozen_weights
from klrl.training.prompts import PromptSchedule, stop_token_ids
from klrl.training.record import MetricsLog, NoTracking, RunTracker, read_metrics, write_status
from klrl.training.rollout_queue import queue_layout
from klrl.training.scoring import Forward
from klrl.grading.verify_worker import grading_counts


MAX_MODEL_ARTIFACT_BYTES = 100 * 2**20  # larger final models are referenced by path in MLflow, not copied


class Trainer:
    def __init__(self, config: TrainConfig, out_dir: Path, tracker: RunTracker | None = None) -> None:
        self.config = config
        self.out_dir = Path(out_dir)
        if config.threads:
            torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        self.procs = distributed.setup(config.device, config.mixed_precision)
        self.tracker = tracker if tracker is not None and self.procs.is_main else NoTracking()
        share = self._share()
        self.tokenizer = AutoTokenizer.from_pretrained(config.base_model, revision=config.base_revision)
        source = self._base_model() if self.procs.sharded and self.procs.is_main else None  # rank 0's one host copy
        self.policy = self._model(source, trainable=True)
        self.reference = self._model(source, offload=config.reference_offload)
        del source
        train_rows, eval_rows = (
            read_split(
                Path(path),
                config.reward,
                RowLimits(config.max_prompt_tokens, config.max_answer_chars),
                self._count_tokens,
            )
            for path in (config.train_data, config.eval_data)
        )
        self.eval_rows = eval_rows[: config.eval_size]
        stops = stop_token_ids(self.tokenizer, config.base_model, config.stop_tokens, config.base_revision)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else stops[0]
        forward = Forward(
            config.temperature,
            config.mixed_precision,
            self.procs.device,
            share_prompts=not config.activation_checkpointing,  # activation checkpointing keeps no cache
            micro_batch_size=config.micro_batch_size,
        )
        self.learner = Learner(config, self.policy, self.reference, self.procs, forward)
        self.actor = Actor(
            config,
            self.policy,
            self.tokenizer,
            PromptSchedule(train_rows, config.prompts_per_step, config.seed),
            make_sampler(config, self.procs, stops, pad),
            get_reward(config.reward),
            forward,
            share,
            pad,
        )
        self.step = 0

    def _count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text).input_ids)

    def _share(self) -> slice:
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
        return local_share(config.prompts_per_step * config.group_size, config.group_size, self.procs.rank, world)

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
            return model.to(self.procs.device)
        if source is not None:
            model.generation_config = source.generation_config  # what final/ saves
        return self.procs.load_from_main(model, source, config.mixed_precision, offload)

    # ----------------------------------------------------------------- state
    def _training_state(self) -> dict:
        """What a checkpoint holds: the learner's state (the policy and the AdamW moments, each
        process's shards, the scheduler) and the actor's (the queued batches,
        klrl.training.rollout_queue). Collective."""
        learner = self.learner.state()
        queued, queue_plain = self.actor.state(self.procs)
        tensors = learner["tensors"] | {"queue": queued}
        return {"step": self.step, "tensors": tensors, "plain": learner["plain"] | {"queue": queue_plain}}

    def _restore(self) -> None:
        """Resume from the newest readable checkpoint, if any (each process reads its own shards)."""

        def layout(plain: dict) -> dict:  # the tensors to read, shaped as this process holds them
            if "queue" not in plain:
                raise RefusedCheckpoint(
                    "written by a klrl that kept the stale weights, before the off-policy lag became a queue of "
                    "rollouts; delete the cell's checkpoints/ to train it again from step 0, or finish it with the klrl that wrote it"
                )
            return self.learner.tensors()["tensors"] | {"queue": queue_layout(plain["queue"])}

        state = load_checkpoint(self.out_dir, layout)
        if state is None:
            self.learner.optimizer.state.clear()  # reading the layout made a fresh optimizer's state: start as new
            return
        tensors, plain = state["tensors"], state["plain"]
        self.learner.restore(tensors, plain)
        self.actor.restore(tensors["queue"], plain["queue"])
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
            evaluation = (
                {"periodic_eval/pass@1": self.actor.evaluate(self.eval_rows, self.step)}
                if self._due(self.config.eval_every)
                else {}
            )
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
            self._log(log, {"step": self.step, "periodic_eval/pass@1": self.actor.evaluate(self.eval_rows, self.step)})
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
        """Step `self.step`: the actor's batch of this step, the learner's update from it;
        returns the step's metrics (this process's)."""
        start = time.perf_counter()
        batch = self.actor.take(self.step)
        generate = time.perf_counter() - start
        metrics = self.learner.learn(batch)
        return {"step": self.step, "rollout/version": batch.version} | metrics | {"time/generate": generate}

    def close(self) -> None:
        """Release the rollout backend's engine (vLLM's), before the process group goes."""
        self.actor.close()
