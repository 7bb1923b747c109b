"""The actor: the batches the learner learns from, sampled, graded and queued.

`take(t)` hands the learner step t's batch. Before, it samples with the current policy θ_t every
rollout not yet queued up to step t + k (k = `async_lag`; klrl.training.rollout_queue), each from
its step's prompts with its step's seeded generator, this process's share of the rows; grades
it; off-policy scores log μ = log θ_t of its tokens with the learner's forward
(klrl.training.scoring.Forward); and queues it. Step t's batch is the oldest queued. The sampler
is `generation_backend`'s: hf samples with the policy's model itself, vllm with a colocated engine
given the policy's weights once per optimizer step. Its state in a checkpoint is the queue.
"""

from __future__ import annotations

import dataclasses
from collections import deque

import torch

from klrl.training.config import TrainConfig
from klrl.training.periodic_eval import pass_at_1
from klrl.training.precision import forward_precision
from klrl.training.prompts import PromptSchedule, encode_prompts
from klrl.training.rollout_queue import Batch, queue_state, restore_queue
from klrl.training.sampling import HFSampler, completion_texts
from klrl.training.scoring import Forward
from klrl.training.seeds import seeded_generator


def make_sampler(config: TrainConfig, procs, stops: tuple[int, ...], pad: int):
    """The rollout backend: `hf` samples with the learner's model, `vllm` with an engine of its own."""
    if config.generation_backend == "hf":
        broadcast = procs.broadcast if procs.world > 1 else None
        return HFSampler(stops, pad, config.max_new_tokens, config.temperature, config.top_p, broadcast, procs.gathered)
    from klrl.training.vllm_backend import VLLMEngine, VLLMSampler

    engine = VLLMEngine(
        config.base_model,
        seed=config.seed,
        dtype=config.vllm_dtype,
        memory_fraction=config.vllm_memory_fraction,
        max_model_len=config.vllm_max_model_len,
        processes=procs.world,
    )
    return VLLMSampler(engine, stops, pad, config.max_new_tokens, config.temperature, config.top_p)


class Actor:
    """Samples with the current policy, grades, and queues what later steps learn from."""

    def __init__(
        self,
        config: TrainConfig,
        policy,
        tokenizer,
        schedule: PromptSchedule,
        sampler,
        reward_fn,
        forward: Forward,
        share: slice,
        pad_id: int,
    ) -> None:
        self.config, self.policy, self.tokenizer, self.schedule = config, policy, tokenizer, schedule
        self.sampler, self.reward_fn, self.forward = sampler, reward_fn, forward
        self.share, self.pad_id = share, pad_id  # this process's rows of each batch; the padding id
        self.queue: deque[Batch] = deque()  # the batches of steps t … t + k, oldest first

    def take(self, step: int) -> Batch:
        """Step `step`'s batch, the queue first filled up to step `step` + k by the policy as it
        is now (the weights of optimizer step `step`)."""
        last = min(step + self.config.async_lag, self.config.steps - 1)
        first = self.queue[-1].step + 1 if self.queue else step
        for later in range(first, last + 1):
            self.queue.append(self.sample(later, version=step))
        return self.queue.popleft()

    def sample(self, step: int, version: int) -> Batch:
        """The batch that step `step` learns from, sampled now by the current policy (the weights
        of optimizer step `version`) from that step's prompts with that step's generator: this
        process's rows, graded, and off-policy with log μ of its tokens."""
        config = self.config
        prompts = self.schedule.batch(step)
        answers = [row["answer"] for row in prompts for _ in range(config.group_size)][self.share]
        encoded = [ids for ids in encode_prompts(self.tokenizer, prompts) for _ in range(config.group_size)]
        self.policy.eval()
        self.sampler.sync(self.policy, version)
        with forward_precision(self.forward.precision, self.forward.device):
            rollout = self.sampler.sample(
                self.policy, encoded, seeded_generator(config.seed, "rollout", step), self.share
            )
        texts = completion_texts(self.tokenizer, rollout)
        rewards = torch.tensor(self.reward_fn(texts, answers), dtype=torch.float32)
        behaviour_logp = self.forward.logp(self.policy, rollout) if config.async_lag else None
        return Batch(step, version, rollout, behaviour_logp, rewards)

    def evaluate(self, rows: list[dict], version: int) -> float:
        """pass@1 of the current policy (optimizer step `version`) on `rows`, at temperature 1."""
        self.policy.eval()
        sampler = dataclasses.replace(self.sampler, temperature=1.0, top_p=1.0)
        sampler.sync(self.policy, version)
        generator = seeded_generator(self.config.seed, "eval")
        with forward_precision(self.forward.precision, self.forward.device):
            return pass_at_1(
                self.policy, self.tokenizer, sampler, rows, self.reward_fn, self.config.eval_samples, generator
            )

    def state(self, procs) -> tuple[dict, list[dict]]:
        """The queue as checkpoint tensors and plain values (`queue_state`; read back into
        tensors of `queue_layout`). Collective."""
        return queue_state(self.queue, procs, self.pad_id)

    def restore(self, tensors: dict, plain: list[dict]) -> None:
        """This process's rows of a checkpoint's queue."""
        self.queue = restore_queue(tensors, plain, self.share)

    def close(self) -> None:
        """Release the rollout backend's engine (vLLM's), before the process group goes."""
        self.sampler.close()
