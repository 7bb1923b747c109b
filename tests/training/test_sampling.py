"""The hf rollout backend: KV-cache sampling is exact, seeded, and stops at EOS or the end of the turn, masking what follows."""

import json

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.evaluation.harness import stop_kwargs
from klrl.training.prompts import encode_prompts, stop_token_ids
from klrl.training.sampling import HFSampler, completion_mask, left_pad, next_token_distribution, position_ids


def _setup(tiny_base):
    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    model = AutoModelForCausalLM.from_pretrained(tiny_base).eval()
    prompts = encode_prompts(
        tokenizer, [{"prompt": p} for p in ("12+30", "7-3", "Ann has 4 pens and gets 5 more. How many pens now?")]
    )
    return tokenizer, model, prompts


def test_top_p_keeps_the_smallest_set_reaching_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    assert torch.allclose(next_token_distribution(logits, 1.0, 0.7), torch.tensor([[0.625, 0.375, 0.0]]))
    assert torch.allclose(next_token_distribution(logits, 1.0, 0.5), torch.tensor([[1.0, 0.0, 0.0]]))
    assert torch.allclose(next_token_distribution(logits, 1.0, 1.0), torch.tensor([[0.5, 0.3, 0.2]]))
    hot = next_token_distribution(logits, 2.0, 1.0)
    assert torch.allclose(hot, torch.softmax(logits / 2, -1))


def test_completion_mask_keeps_the_first_stop_token_and_nothing_after():
    tokens = torch.tensor([[1, 2, 9, 9, 9], [1, 9, 3, 9, 9], [1, 2, 3, 4, 5], [1, 7, 9, 2, 2]])
    only_eos = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    assert torch.equal(completion_mask(tokens, (9,)), only_eos)
    with_end_of_turn = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    assert torch.equal(completion_mask(tokens, (9, 7)), with_end_of_turn)


def test_kv_cache_sampling_equals_sampling_without_cache(tiny_base):
    tokenizer, model, prompts = _setup(tiny_base)
    sampler = HFSampler((tokenizer.eos_token_id,), tokenizer.pad_token_id, max_new_tokens=6)
    rollout = sampler.sample(model, prompts * 4, torch.Generator().manual_seed(5))
    # the same draws, recomputing the whole sequence at every step
    generator = torch.Generator().manual_seed(5)
    ids, mask = left_pad(prompts * 4, tokenizer.pad_token_id)
    done = torch.zeros(ids.shape[0], dtype=torch.bool)
    produced = []
    with torch.no_grad():
        for _ in range(rollout.completion_ids.shape[1]):
            logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits[:, -1]
            token = torch.multinomial(next_token_distribution(logits, 1.0, 1.0), 1, generator=generator).squeeze(-1)
            token = token.masked_fill(done, tokenizer.pad_token_id)
            done |= token == tokenizer.eos_token_id
            produced.append(token)
            ids = torch.cat([ids, token[:, None]], 1)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
    assert torch.equal(rollout.completion_ids, torch.stack(produced, 1))


def test_same_seed_same_rollout_and_greedy_matches_generate(tiny_base):
    tokenizer, model, prompts = _setup(tiny_base)
    sampler = HFSampler((tokenizer.eos_token_id,), tokenizer.pad_token_id, max_new_tokens=5)
    first = sampler.sample(model, prompts, torch.Generator().manual_seed(1))
    again = sampler.sample(model, prompts, torch.Generator().manual_seed(1))
    other = sampler.sample(model, prompts, torch.Generator().manual_seed(2))
    assert torch.equal(first.completion_ids, again.completion_ids)
    assert first.completion_ids.tolist() != other.completion_ids.tolist()
    greedy = HFSampler((tokenizer.eos_token_id,), tokenizer.pad_token_id, max_new_tokens=5, temperature=0)
    ours = greedy.sample(model, prompts, None)
    ids, mask = left_pad(prompts, tokenizer.pad_token_id)
    theirs = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=5, do_sample=False)[:, ids.shape[1] :]
    for row in range(len(prompts)):
        keep = ours.completion_mask[row].bool()
        assert torch.equal(ours.completion_ids[row][keep], theirs[row][: int(keep.sum())])


QWEN_STYLE_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _qwen_style_tokenizer():
    """A tokenizer shaped like Qwen2.5's: EOS `<|endoftext|>`, the turn closed by `<|im_end|>`."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["<unk>", "a", "b", "\n"])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|endoftext|>", chat_template=QWEN_STYLE_TEMPLATE
    )


def test_a_turn_ends_at_the_end_of_turn_token_when_eos_differs(tmp_path):
    tokenizer = _qwen_style_tokenizer()
    end_of_text, end_of_turn = tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>"])
    assert end_of_text != end_of_turn
    assert stop_token_ids(tokenizer) == (end_of_text, end_of_turn)
    tokenizer.save_pretrained(tmp_path)  # as lm-eval's side reads it: from the model folder
    assert stop_kwargs(str(tmp_path), "hf") == {"eos_token_id": [end_of_text, end_of_turn]}
    assert stop_kwargs(str(tmp_path), "vllm") == {"stop_token_ids": [end_of_text, end_of_turn]}
    tokenizer.chat_template = None  # no chat turn: only the EOS ends a completion
    assert stop_token_ids(tokenizer) == (end_of_text,)


def test_the_sampler_stops_at_a_stop_token_from_the_generation_config(talkative_folder):
    """A stop token declared only in generation_config.json (as Llama 3 declares <|eot_id|>) ends
    sampling: nothing after it is generated, kept in the mask or decoded for the reward."""
    tokenizer = AutoTokenizer.from_pretrained(talkative_folder)
    model = AutoModelForCausalLM.from_pretrained(talkative_folder).eval()
    prompts = encode_prompts(tokenizer, [{"prompt": p} for p in ("12+3=", "45-6=", "7+8=", "99-9=")])
    free = HFSampler((tokenizer.eos_token_id,), tokenizer.pad_token_id, max_new_tokens=8, temperature=0).sample(
        model, prompts, None
    )
    generated = free.completion_ids[free.completion_mask.bool()].tolist()
    stop = max(set(generated) - {tokenizer.eos_token_id}, key=generated.count)  # a token the model emits mid-completion
    (talkative_folder / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [tokenizer.eos_token_id, stop]})
    )
    stops = stop_token_ids(tokenizer, talkative_folder)
    assert stops == (tokenizer.eos_token_id, stop)
    cut = HFSampler(stops, tokenizer.pad_token_id, max_new_tokens=8, temperature=0).sample(model, prompts, None)
    for row in range(len(prompts)):
        kept = cut.completion_ids[row][cut.completion_mask[row].bool()].tolist()
        whole = free.completion_ids[row][free.completion_mask[row].bool()].tolist()
        first = next((i for i, token in enumerate(whole) if token in stops), len(whole) - 1)
        assert kept == whole[: first + 1]  # up to and including the first stop, nothing after
    assert cut.completion_mask.sum() < free.completion_mask.sum()
