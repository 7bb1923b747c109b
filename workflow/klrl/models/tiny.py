"""The `tiny` base model: a small Llama with a character tokenizer, pretrained from scratch.

`pretrain_tiny` builds it on a CPU in minutes from the arithmetic family's corpus
(`klrl.tasks.arith.pretraining_example`), in which a share of the answers have one wrong digit.
The result is a competent but noisy base: the right answer is its most likely one (greedy
accuracy high), yet sampling at temperature 1 often draws a corrupted one, and it is weaker
on the out-of-domain tasks, which make up less of its corpus. That leaves RL something to
sharpen and the KL to the base something to hold on to.

The folder it writes is a plain Hugging Face model (config, safetensors, tokenizer with a
chat template) that transformers and lm-eval load.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
import string
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from klrl.core.files import sha256_file
from klrl.models.base import recipe_digest
from klrl.models.tiny_settings import BUILD_VERSION, TinyConfig
from klrl.core.schedule import lr_factor
from klrl.tasks.arith import pretraining_example

PAD, UNK, USER, ASSISTANT, END = "<|pad|>", "<|unk|>", "<|user|>", "<|assistant|>", "<|end|>"
BOXED = "\\boxed{"
ALPHABET = string.digits + string.ascii_letters + " .,:;?!'\"+-*/=()[]{}\\^_<>\n"
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}" + USER + "{{ message['content'] }}"
    "{% elif message['role'] == 'assistant' %}" + ASSISTANT + "{{ message['content'] }}" + END + "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}" + ASSISTANT + "{% endif %}"
)


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Characters as tokens, plus chat markers and `\\boxed{` as single tokens."""
    vocab = {token: i for i, token in enumerate([PAD, UNK, *ALPHABET])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens([PAD, UNK, USER, ASSISTANT, END])
    backend.add_tokens([BOXED])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=END,
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
        model_max_length=256,
    )


def render(problem: str, answer: str | None = None) -> str:
    """The chat-formatted text (what CHAT_TEMPLATE gives), with the answer boxed when given."""
    prompt = f"{USER}{problem}{ASSISTANT}"
    return prompt if answer is None else f"{prompt}{BOXED}{answer}}}{END}"


def build_model(tokenizer: PreTrainedTokenizerFast, config: TinyConfig) -> LlamaForCausalLM:
    model_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden,
        intermediate_size=config.intermediate,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.heads,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(model_config)


def example_batches(tokenizer: PreTrainedTokenizerFast, config: TinyConfig, rng: random.Random):
    """An endless stream of (tokens, labels, attention mask) batches, one task per batch.

    Each batch draws its task from `mix` and holds as many examples as fit `batch_tokens`
    once right-padded; the labels keep only the answers (the tokens after the assistant
    marker, its end marker included), so all the learning goes into the skill. Answers are
    clean for the first `clean_fraction` of the steps and corrupted with `corrupt_prob` after.
    The tasks are taken in sorted order, so that the corpus depends on the shares alone, not on
    the order a config lists them in (the recipe's hash does not see that order).
    """
    tasks = sorted(config.mix)
    weights = [config.mix[task] for task in tasks]
    for step in itertools.count():
        corrupt_prob = config.corrupt_prob if step >= config.clean_fraction * config.steps else 0.0
        task = rng.choices(tasks, weights=weights)[0]
        rows: list[tuple[list[int], int]] = []
        width = 0
        while True:
            problem, answer = pretraining_example(task, rng, corrupt_prob)
            ids = tokenizer.encode(render(problem, answer))
            if rows and (len(rows) + 1) * max(width, len(ids)) > config.batch_tokens:
                break
            rows.append((ids, len(tokenizer.encode(render(problem)))))
            width = max(width, len(ids))
        tokens = torch.full((len(rows), width), tokenizer.pad_token_id)
        labels = torch.full((len(rows), width), -100)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (ids, prompt_len) in enumerate(rows):
            tokens[i, : len(ids)] = torch.tensor(ids)
            labels[i, prompt_len : len(ids)] = torch.tensor(ids[prompt_len:])
            mask[i, : len(ids)] = 1
        yield tokens, labels, mask


def pretrain_tiny(out_dir: Path, config: TinyConfig, log_every: int = 100) -> dict:
    """Pretrain the tiny base, measure its competence (`klrl.models.competence`) and save it to
    `out_dir` (written whole, then renamed into place), with klrl_pretrain.json: the recipe and
    its hash, the competence, the weights' sha256 and what ran the build.

    Below a floor of the recipe, the model goes to `<out_dir>.below-floor` instead (kept for a
    look, never used) and a ValueError names every miss in one line.
    """
    from klrl.models.competence import below_floor, measure_competence

    torch.manual_seed(config.seed)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.95))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, config.warmup, config.steps, True)
    )
    batches = example_batches(tokenizer, config, random.Random(config.seed))
    start, losses = time.monotonic(), []
    model.train()
    for step in range(config.steps):
        tokens, labels, mask = next(batches)
        loss = model(input_ids=tokens, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if log_every and (step + 1) % log_every == 0:
            recent = sum(losses[-log_every:]) / log_every
            print(f"step {step + 1}/{config.steps} loss {recent:.4f} {time.monotonic() - start:.0f}s", flush=True)
    seconds = time.monotonic() - start
    model.eval()
    mark = time.monotonic()
    competence = measure_competence(model, tokenizer, config)
    report = {
        "config": asdict(config),
        "recipe_hash": recipe_digest("tiny", BUILD_VERSION, asdict(config)),
        "parameters": sum(p.numel() for p in model.parameters()),
        "pretrain_seconds": seconds,
        "check_seconds": time.monotonic() - mark,
        "final_loss": sum(losses[-50:]) / len(losses[-50:]),
        "competence": competence,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    misses = below_floor(competence, config.floor)
    if misses:
        kept = Path(out_dir).with_name(Path(out_dir).name + ".below-floor")
        _save(model, tokenizer, kept, report | {"below_floor": misses})
        raise ValueError(f"tiny base below its recipe's floor: {'; '.join(misses)}; the model is kept in {kept}")
    _save(model, tokenizer, out_dir, report)
    return report


def _save(model: LlamaForCausalLM, tokenizer, out_dir: Path, report: dict) -> None:
    """The model folder, written beside `out_dir` then renamed into place; the report gets the
    sha256 of the weights (`weights_sha256`): equal builds of one recipe have equal hashes."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    report = report | {"weights_sha256": sha256_file(tmp / "model.safetensors")}
    (tmp / "klrl_pretrain.json").write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.replace(out_dir)
