"""The paper models' chat templates and end-of-turn tokens, from tokenizer configs that carry the
real templates (tests/paper_models.py): a prepared row (its shots as earlier turns) renders as
each model is prompted, and a completion ends at the model's end of turn, whatever its EOS, so
that the reward reads the answer of the turn and nothing after it."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.grading.rewards import get_reward
from klrl.training.prompts import encode_prompts, stop_token_ids
from klrl.training.sampling import HFSampler, completion_texts
from paper_models import PAPER_MODELS, write_paper_model, write_tokenizer

ROW = {"prompt": "What is 2+3?", "shots": [{"user": "What is 1+1?", "assistant": "\\boxed{2}"}]}
QWEN_TURNS = (
    "<|im_start|>user\nWhat is 1+1?<|im_end|>\n<|im_start|>assistant\n\\boxed{2}<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"
)
RENDERED = {
    "qwen2.5-7b": "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
    + QWEN_TURNS,
    "llama3.1-8b-instruct": (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWhat is 1+1?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n\\boxed{2}<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    ),
    "qwen3-4b-instruct": QWEN_TURNS,
}


@pytest.mark.parametrize("name", PAPER_MODELS)
def test_a_row_renders_as_the_model_is_prompted(name, tmp_path):
    tokenizer = write_tokenizer(name, tmp_path)
    ids = encode_prompts(tokenizer, [ROW])[0]
    assert tokenizer.decode(ids) == RENDERED[name]
    specials = [token for token in PAPER_MODELS[name].special_tokens if token in RENDERED[name]]
    assert sum(ids.count(tokenizer.convert_tokens_to_ids(token)) for token in specials) == sum(
        RENDERED[name].count(token) for token in specials
    )
    assert tokenizer.bos_token is None or ids.count(tokenizer.bos_token_id) == 1  # the template's BOS, not a second one


def scripted(model, tokens: list[int]):
    """Make `model` choose `tokens`, one per forward (the prefill, then each decoding step): its
    output layer's logits are replaced by a one-hot of the next scripted token. Returns the hook's handle."""
    calls = iter(tokens)

    def choose(module, inputs, logits):
        forced = torch.full_like(logits, -1e4)
        forced[..., next(calls)] = 0.0
        return forced

    return model.lm_head.register_forward_hook(choose)


@pytest.mark.slow  # writes a model and starts the grading service
@pytest.mark.parametrize("name", PAPER_MODELS)
def test_a_completion_ends_at_the_end_of_turn_and_its_answer_is_rewarded(name, tmp_path):
    """After the turn's answer the model goes on with another turn's; the completion stops at the
    end-of-turn token (found in the chat template or the generation config), so the reward reads
    5, not the 7 that follows. Stopping at the EOS alone fails Qwen2.5, whose EOS is <|endoftext|>."""
    folder = write_paper_model(name, tmp_path / name)
    model = PAPER_MODELS[name]
    tokenizer, network = AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder)
    stops = stop_token_ids(tokenizer, folder)
    assert tokenizer.convert_ids_to_tokens(list(stops)) == list(
        dict.fromkeys([tokenizer.eos_token, *model.generation_eos, model.end_of_turn])
    )
    answer, after = (tokenizer.encode(text, add_special_tokens=False) for text in ("\\boxed{5}", "\n\\boxed{7}"))
    script = answer + [tokenizer.convert_tokens_to_ids(model.end_of_turn)] + after
    prompts = encode_prompts(tokenizer, [ROW])
    rewards = {}
    for label, stop_ids in (("end of turn", stops), ("EOS alone", (tokenizer.eos_token_id,))):
        hook = scripted(network, script)
        sampler = HFSampler(stop_ids, stops[0], max_new_tokens=len(script), temperature=0.0)
        rollout = sampler.sample(network.eval(), prompts, None)
        hook.remove()
        rewards[label] = get_reward("math")(completion_texts(tokenizer, rollout), ["5"])[0]
        if label == "end of turn":
            assert rollout.completion_mask.sum().item() == len(answer) + 1  # the stop token included
            assert completion_texts(tokenizer, rollout) == ["\\boxed{5}"]
    assert rewards == {"end of turn": 1.0, "EOS alone": float(tokenizer.eos_token == model.end_of_turn)}
