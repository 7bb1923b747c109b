"""The hf rollout backend: KV-cache sampling is exact, seeded, and masks what follows EOS."""

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.training.prompts import encode_prompts
from klrl.training.sampling import HFSampler, completion_mask, left_pad, next_token_distribution, position_ids


def _setup(tiny_base):
    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    model = AutoModelForCausalLM.from_pretrained(tiny_base).eval()
    prompts = encode_prompts(tokenizer, ["12+30", "7-3", "Ann has 4 pens and gets 5 more. How many pens now?"])
    return tokenizer, model, prompts


def test_top_p_keeps_the_smallest_set_reaching_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    assert torch.allclose(next_token_distribution(logits, 1.0, 0.7), torch.tensor([[0.625, 0.375, 0.0]]))
    assert torch.allclose(next_token_distribution(logits, 1.0, 0.5), torch.tensor([[1.0, 0.0, 0.0]]))
    assert torch.allclose(next_token_distribution(logits, 1.0, 1.0), torch.tensor([[0.5, 0.3, 0.2]]))
    hot = next_token_distribution(logits, 2.0, 1.0)
    assert torch.allclose(hot, torch.softmax(logits / 2, -1))


def testcompletion_mask_keeps_the_first_eos_and_nothing_after():
    eos = 9
    tokens = torch.tensor([[1, 2, 9, 9, 9], [1, 9, 3, 9, 9], [1, 2, 3, 4, 5]])
    expected = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]])
    assert torch.equal(completion_mask(tokens, eos), expected)


def test_kv_cache_sampling_equals_sampling_without_cache(tiny_base):
    tokenizer, model, prompts = _setup(tiny_base)
    sampler = HFSampler(tokenizer.eos_token_id, tokenizer.pad_token_id, max_new_tokens=6)
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
    sampler = HFSampler(tokenizer.eos_token_id, tokenizer.pad_token_id, max_new_tokens=5)
    first = sampler.sample(model, prompts, torch.Generator().manual_seed(1))
    again = sampler.sample(model, prompts, torch.Generator().manual_seed(1))
    other = sampler.sample(model, prompts, torch.Generator().manual_seed(2))
    assert torch.equal(first.completion_ids, again.completion_ids)
    assert first.completion_ids.tolist() != other.completion_ids.tolist()
    greedy = HFSampler(tokenizer.eos_token_id, tokenizer.pad_token_id, max_new_tokens=5, temperature=0)
    ours = greedy.sample(model, prompts, None)
    ids, mask = left_pad(prompts, tokenizer.pad_token_id)
    theirs = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=5, do_sample=False)[:, ids.shape[1] :]
    for row in range(len(prompts)):
        keep = ours.completion_mask[row].bool()
        assert torch.equal(ours.completion_ids[row][keep], theirs[row][: int(keep.sum())])
