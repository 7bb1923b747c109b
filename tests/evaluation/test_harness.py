"""klrl.evaluation.harness: each task's lm-eval config from the registry, decoding, agreement with the
trainer (greedy text for text, pass@1, stop tokens), no environment report, errors on a bad model."""

import json

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.evaluation.harness import Decoding, evaluate, lm_eval_task_name, write_task_configs
from klrl.grading.rewards import arithmetic_reward
from klrl.tasks import TASKS
from klrl.tasks.data import prepare, read_split
from klrl.training.periodic_eval import pass_at_1
from klrl.training.prompts import chat_messages, encode_prompts, stop_token_ids
from klrl.training.sampling import HFSampler, completion_texts
from klrl.training.trainer import Trainer

from conftest import tiny_config


def test_every_registered_task_gets_an_lm_eval_config_that_reads_its_prepared_data(eval_data, tmp_path):
    from lm_eval.tasks import TaskManager

    write_task_configs(list(TASKS), tmp_path)
    manager = TaskManager(include_path=str(tmp_path), include_defaults=False, metadata={"data_dir": str(eval_data)})
    assert set(manager.all_subtasks) == {lm_eval_task_name(task) for task in TASKS}
    loaded = manager.load([lm_eval_task_name("arith-long")])["tasks"]["klrl_arith_long"]
    assert [doc["id"] for doc in loaded.eval_docs] == [
        row["id"] for row in read_split(eval_data / "arith-long" / "test.jsonl")
    ]


def test_decoding_rejects_what_it_cannot_mean():
    with pytest.raises(ValueError, match="greedy"):
        Decoding(samples=4, greedy=True)
    with pytest.raises(ValueError, match="temperature"):
        Decoding(temperature=0.0)
    assert Decoding(samples=1, greedy=True).generation_kwargs()["do_sample"] is False


SHOTS = [
    {"user": "What is 3 plus 4?", "assistant": "3 plus 4 is 7. \\boxed{7}"},
    {"user": "What is 25 minus 3?", "assistant": "\\boxed{22}"},
]


@pytest.mark.parametrize("shots", [[], SHOTS], ids=["zero-shot", "two-shots"])
def test_greedy_evaluation_sees_exactly_what_the_trainer_sees(talkative_base, eval_data, shots, tmp_path):
    """Same chat (shots as earlier turns, then the prompt), template, decoding and grading:
    greedy completions of a random-weight model, which depend on every token before them, are
    identical text for text."""
    data = eval_data
    if shots:
        data = tmp_path / "data"
        prepare("arith-spoken", data / "arith-spoken", seed=0, sizes={"train": 4, "test": 12}, shots=shots)
    task = "arith-spoken" if shots else "arith"
    name = lm_eval_task_name(task)
    results, _ = evaluate(str(talkative_base), [task], data, Decoding(samples=1, greedy=True, max_new_tokens=10))
    logged = sorted(results["samples"][name], key=lambda sample: sample["doc_id"])
    tokenizer = AutoTokenizer.from_pretrained(talkative_base)
    model = AutoModelForCausalLM.from_pretrained(talkative_base).eval()
    rows = read_split(data / task / "test.jsonl")
    assert [len(chat_messages(row)) for row in rows] == [2 * len(shots) + 1] * len(rows)
    contexts = [sample["arguments"][0][0] for sample in logged]
    assert contexts == [
        tokenizer.apply_chat_template(chat_messages(row), add_generation_prompt=True, tokenize=False) for row in rows
    ]
    sampler = HFSampler((tokenizer.eos_token_id,), tokenizer.pad_token_id, max_new_tokens=10, temperature=0)
    ours = completion_texts(tokenizer, sampler.sample(model, encode_prompts(tokenizer, rows), None))
    theirs = [sample["filtered_resps"][0][0] for sample in logged]
    assert len({len(text) for text in ours}) > 1  # varied, not all empty
    assert theirs == ours
    trainer_score = pass_at_1(model, tokenizer, sampler, rows, arithmetic_reward, 1, None)
    assert results["results"][name]["pass@1,all-samples"] == trainer_score


def test_a_trained_checkpoint_evaluates(tiny_base, eval_data, tmp_path):
    config = tiny_config(tiny_base, eval_data / "arith", group_size=2, max_new_tokens=4, eval_size=2)
    Trainer(config, tmp_path / "train").run()
    results, timing = evaluate(
        str(tmp_path / "train" / "final"), ["arith"], eval_data, Decoding(samples=2, max_new_tokens=4)
    )
    assert results["n-samples"]["klrl_arith"]["effective"] == 12
    assert all(len(s["filtered_resps"][0]) == 2 for s in results["samples"]["klrl_arith"])
    assert timing["generation"] > 0


def test_an_evaluation_collects_no_environment_report_and_is_seeded(tiny_base, eval_data, monkeypatch):
    """lm-eval's evaluator runs without its environment report (torch's collect_env: pip, lscpu,
    ... as subprocesses); the same seed gives the same samples."""
    import torch.utils.collect_env

    monkeypatch.setattr(torch.utils.collect_env, "get_pretty_env_info", lambda: pytest.fail("torch's collect_env ran"))
    runs = [
        evaluate(str(tiny_base), ["arith"], eval_data, Decoding(samples=2, max_new_tokens=4), limit=3, seed=seed)[0]
        for seed in (1, 1, 2)
    ]
    texts = [[sample["filtered_resps"][0] for sample in results["samples"]["klrl_arith"]] for results in runs]
    assert texts[0] == texts[1] != texts[2]
    assert "pretty_env_info" not in runs[0]


def test_an_unloadable_model_folder_is_a_clear_error(eval_data, tmp_path, tiny_base):
    empty = tmp_path / "cell" / "train" / "final"
    empty.mkdir(parents=True)
    with pytest.raises(ValueError, match="not a model folder"):
        evaluate(str(empty), ["arith"], eval_data, Decoding(samples=1))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((tiny_base / "config.json").read_text())
    with pytest.raises(ValueError, match="cannot load it"):
        evaluate(str(broken), ["arith"], eval_data, Decoding(samples=1))


def test_lm_eval_stops_where_the_trainer_stops(talkative_folder, eval_data):
    """A stop token declared in generation_config.json (an end-of-turn token that is not the EOS)
    ends lm-eval's completions exactly where it ends the trainer's rollouts."""
    tokenizer = AutoTokenizer.from_pretrained(talkative_folder)
    model = AutoModelForCausalLM.from_pretrained(talkative_folder).eval()
    rows = read_split(eval_data / "arith" / "test.jsonl")
    prompts = encode_prompts(tokenizer, rows)
    free = HFSampler((tokenizer.eos_token_id,), tokenizer.pad_token_id, max_new_tokens=10, temperature=0).sample(
        model, prompts, None
    )
    generated = free.completion_ids[free.completion_mask.bool()].tolist()
    stop = max(set(generated) - {tokenizer.eos_token_id}, key=generated.count)
    (talkative_folder / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [tokenizer.eos_token_id, stop]})
    )
    sampler = HFSampler(
        stop_token_ids(tokenizer, talkative_folder), tokenizer.pad_token_id, max_new_tokens=10, temperature=0
    )
    ours = completion_texts(tokenizer, sampler.sample(model, prompts, None))
    results, _ = evaluate(
        str(talkative_folder), ["arith"], eval_data, Decoding(samples=1, greedy=True, max_new_tokens=10)
    )
    theirs = [s["filtered_resps"][0][0] for s in sorted(results["samples"]["klrl_arith"], key=lambda s: s["doc_id"])]
    assert theirs == ours
    assert ours != completion_texts(tokenizer, free)  # the stop token cut some completions short
