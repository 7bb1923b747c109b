"""The vllm backend's parts that need no vLLM: rollouts from token lists, request seeds, the
error without vLLM. The engine itself is tested for real in tests/test_vllm.py."""

import importlib.util

import pytest
import torch

from klrl.training import vllm_backend
from klrl.training.vllm_backend import completions_rollout, request_seeds

EOS, PAD = 2, 0


def test_completions_become_a_right_padded_rollout():
    rollout = completions_rollout([[5, 6, 7], [8]], [[9, EOS], [10, 11, 12]], PAD, EOS)
    assert rollout.prompt_ids.tolist() == [[5, 6, 7], [PAD, PAD, 8]]
    assert rollout.prompt_mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert rollout.completion_ids.tolist() == [[9, EOS, PAD], [10, 11, 12]]
    assert rollout.completion_mask.tolist() == [[1, 1, 0], [1, 1, 1]]  # the EOS is kept, the padding is not


def test_padding_with_the_eos_token_is_not_mistaken_for_an_eos():
    # SmolLM2 pads with its EOS: a completion cut at the length limit must not gain a token
    rollout = completions_rollout([[5]], [[9, 10], [9, 10, 11, EOS]], EOS, EOS)
    assert rollout.completion_ids.tolist() == [[9, 10, EOS, EOS], [9, 10, 11, EOS]]
    assert rollout.completion_mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]


def test_engine_logprobs_follow_their_tokens_and_padding_is_zero():
    rollout = completions_rollout(
        [[5], [6]], [[9, EOS], [10, 11, 12]], PAD, EOS, logprobs=[[-0.5, -1.5], [-1.0, -2.0, -3.0]]
    )
    assert rollout.engine_logp.tolist() == [[-0.5, -1.5, 0.0], [-1.0, -2.0, -3.0]]
    assert rollout.apply(lambda tensor: tensor[1:]).engine_logp.tolist() == [[-1.0, -2.0, -3.0]]
    assert completions_rollout([[5]], [[9]], PAD, EOS).apply(lambda tensor: tensor[:1]).engine_logp is None


def test_request_seeds_come_from_the_generator():
    first = request_seeds(torch.Generator().manual_seed(3), 5)
    assert first == request_seeds(torch.Generator().manual_seed(3), 5)
    assert first != request_seeds(torch.Generator().manual_seed(4), 5)
    assert len(set(first)) == 5 and all(0 <= seed < 2**31 - 1 for seed in first)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_without_vllm_the_error_says_how_to_get_it():
    with pytest.raises(ImportError, match="generation_backend 'vllm' needs vLLM.*make vllm-env"):
        vllm_backend.VLLMEngine("model", seed=0, dtype="float32", memory_fraction=0.3, max_model_len=None)
