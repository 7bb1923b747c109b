"""The tiny base: tokenizer, chat format, a deterministic pretraining run, and loading it back."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.models import get_base_model
from klrl.models.tiny_settings import TinyConfig
from klrl.models.tiny import BOXED, END, build_tokenizer, pretrain_tiny, render

from conftest import TINY_TEST_MODEL as SMALL


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "model"
    pretrain_tiny(out, TinyConfig(steps=4, **SMALL), log_every=0)
    return out


def test_tokenizer_is_lossless_and_boxed_is_one_token():
    tokenizer = build_tokenizer()
    text = render("Ann has 47 pens and gets 38 more. How many pens now?", "85")
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert tokenizer.convert_ids_to_tokens(ids).count(BOXED) == 1
    assert ids[-1] == tokenizer.eos_token_id == tokenizer.convert_tokens_to_ids(END)
    # a completion decodes back to what the reward parses
    completion = tokenizer.encode(f"{BOXED}85}}{END}")
    assert tokenizer.decode(completion, skip_special_tokens=True) == "\\boxed{85}"


def test_render_equals_the_chat_template():
    tokenizer = build_tokenizer()
    messages = [{"role": "user", "content": "12+30"}]
    assert tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == render("12+30")
    full = messages + [{"role": "assistant", "content": "\\boxed{42}"}]
    assert tokenizer.apply_chat_template(full, tokenize=False) == render("12+30", "42")


def test_pretraining_is_deterministic_for_a_seed(folder, tmp_path):
    pretrain_tiny(tmp_path / "again", TinyConfig(steps=4, **SMALL), log_every=0)
    first = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    second = AutoModelForCausalLM.from_pretrained(tmp_path / "again").state_dict()
    assert all(torch.equal(first[name], second[name]) for name in first)
    pretrain_tiny(tmp_path / "other", TinyConfig(steps=4, seed=1, **SMALL), log_every=0)
    third = AutoModelForCausalLM.from_pretrained(tmp_path / "other").state_dict()
    assert not all(torch.equal(first[name], third[name]) for name in first)


def test_folder_loads_with_transformers_and_keeps_its_report(folder):
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.model_type == "llama"
    assert tokenizer.apply_chat_template(
        [{"role": "user", "content": "1+1"}], tokenize=False, add_generation_prompt=True
    ) == render("1+1")
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    report = json.loads((folder / "klrl_pretrain.json").read_text())
    assert report["config"]["steps"] == 4 and report["parameters"] == sum(p.numel() for p in model.parameters())
    assert not (folder.parent / "model.partial").exists()


def test_folder_loads_with_lm_eval(folder):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(folder), device="cpu", batch_size=2)
    request = Instance("loglikelihood", {}, (render("1+1"), "\\boxed{2}"), 0)
    ((logprob, _),) = lm.loglikelihood([request])
    assert logprob < 0 and torch.isfinite(torch.tensor(logprob))


def test_models_are_built_here_or_declared_with_a_hub_id():
    declared = {
        "qwen2.5-7b": {"hub": "Qwen/Qwen2.5-7B", "revision": "v1", "stop_tokens": ["<|im_end|>"]},
        "tiny": {"jobs": {}},
    }
    qwen = get_base_model("qwen2.5-7b", declared)
    assert (qwen.build, qwen.hub_id, qwen.revision, qwen.stop_tokens) == (
        "hub",
        "Qwen/Qwen2.5-7B",
        "v1",
        ("<|im_end|>",),
    )
    assert get_base_model("tiny", declared).build == "pretrain"
    with pytest.raises(
        ValueError, match="unknown base model 'gpt2'; built here: tiny, smollm2-135m; declared with hub: qwen2.5-7b"
    ):
        get_base_model("gpt2", declared)
    with pytest.raises(ValueError, match="models.tiny: 'tiny' is built here"):
        get_base_model("tiny", {"tiny": {"hub": "x/y"}})


def test_batches_fit_the_token_budget_and_label_only_the_answers():
    import random

    from klrl.models.tiny import example_batches

    tokenizer = build_tokenizer()
    config = TinyConfig(steps=4, batch_tokens=256, clean_fraction=0.5, corrupt_prob=1.0)
    batches = example_batches(tokenizer, config, random.Random(0))
    for step in range(4):
        tokens, labels, mask = next(batches)
        assert tokens.numel() <= 256 and tokens.shape[0] >= 2
        for row in range(tokens.shape[0]):
            text = tokenizer.decode(tokens[row][mask[row].bool()])
            problem = text.removeprefix("<|user|>").split("<|assistant|>")[0]
            answer = tokenizer.decode(labels[row][labels[row] != -100])
            assert answer.startswith(BOXED) and answer.endswith(END)
            if "?" not in problem:  # the clean phase answers right, the corrupted phase never
                op = "+" if "+" in problem else "-"
                a, b = map(int, problem.split(op))
                right = str(a + b if op == "+" else a - b)
                assert (answer == f"{BOXED}{right}}}{END}") == (step < 2)


def test_the_build_records_its_recipe_competence_and_weights(folder):
    from klrl.core.files import sha256_file
    from klrl.models.recipe import recipe_hash

    report = json.loads((folder / "klrl_pretrain.json").read_text())
    assert (
        report["recipe_hash"]
        == recipe_hash("tiny", report["config"])
        == recipe_hash("tiny", TinyConfig(steps=4, **SMALL).__dict__)
    )
    assert report["weights_sha256"] == sha256_file(folder / "model.safetensors")
    assert set(report["competence"]) == set(report["config"]["check_tasks"])
    for score in report["competence"].values():
        assert set(score) == {"greedy", "t1", "problems", "samples"}
        assert (score["problems"], score["samples"]) == (SMALL["check_problems"], 4)


def test_a_build_below_its_floor_fails_in_one_line_and_keeps_the_model(tmp_path):
    out = tmp_path / "model"
    config = TinyConfig(steps=2, **SMALL | {"floor": {"arith/greedy": 0.5, "arith-long/t1": 0.0}})
    with pytest.raises(ValueError) as caught:
        pretrain_tiny(out, config, log_every=0)
    kept = tmp_path / "model.below-floor"
    assert (
        str(caught.value)
        == f"tiny base below its recipe's floor: arith/greedy 0.000 < 0.500; the model is kept in {kept}"
    )
    assert not out.exists() and AutoModelForCausalLM.from_pretrained(kept).config.model_type == "llama"
    report = json.loads((kept / "klrl_pretrain.json").read_text())
    assert report["below_floor"] == ["arith/greedy 0.000 < 0.500"] and report["competence"]["arith"]["greedy"] == 0.0


def test_the_competence_check_scores_what_klrl_evaluate_scores(talkative_base, tmp_path, monkeypatch):
    """Greedy, the build's check and lm-eval score the same held-out problems the same: the
    random-weight model's varied completions, graded by a planted reward that some earn, give
    a number that is neither 0 nor 1 and equal in both."""
    from klrl.grading import rewards
    from klrl.evaluation.harness import Decoding, evaluate, lm_eval_task_name
    from klrl.models.competence import MAX_NEW_TOKENS, measure_competence
    from klrl.tasks.data import prepare

    monkeypatch.setitem(
        rewards.REWARDS,
        "arithmetic",
        lambda completions, references: [float(len(text) % 2 == 0) for text in completions],
    )
    tasks = ["arith", "arith-long"]
    config = TinyConfig(check_tasks=tasks, check_problems=12, check_samples=2, floor={})
    model = AutoModelForCausalLM.from_pretrained(talkative_base).eval()
    competence = measure_competence(model, AutoTokenizer.from_pretrained(talkative_base), config)
    for task in tasks:
        prepare(task, tmp_path / task, seed=0, sizes={"train": 4, "test": 12})
    results, _ = evaluate(
        str(talkative_base), tasks, tmp_path, Decoding(samples=1, greedy=True, max_new_tokens=MAX_NEW_TOKENS)
    )
    for task in tasks:
        theirs = results["results"][lm_eval_task_name(task)]["pass@1,all-samples"]
        assert 0 < competence[task]["greedy"] == round(theirs, 4) < 1
