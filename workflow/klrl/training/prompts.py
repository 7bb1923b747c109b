"""Prompts in and out of the model: which prompts each step trains on, how a prepared row becomes
a chat (its shots as earlier turns, then its prompt), and which tokens end the model's turn.

Because the batch of step t is computed from (seed, t) alone, a resumed run sees exactly
the data an uninterrupted one would; the checkpoint records the position for reference.

A completion ends at the model's end of turn as well as at its EOS: chat templates close the
assistant's turn with a token (`<|im_end|>` for Qwen2.5 and SmolLM2, `<|eot_id|>` for Llama 3,
`<end_of_turn>` for Gemma) that need not be the tokenizer's EOS (Qwen2.5's is `<|endoftext|>`).
Anything sampled after it would be text outside the turn, yet rewarded and KL-penalised.
"""

from __future__ import annotations

import random
from pathlib import Path

# Tokens that close an assistant turn in the chat templates of the common model families.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|end_of_turn|>", "<|eot|>")


class PromptSchedule:
    def __init__(self, rows: list[dict], prompts_per_step: int, seed: int) -> None:
        if prompts_per_step > len(rows):
            raise ValueError(f"prompts_per_step: {prompts_per_step} exceeds the {len(rows)} training prompts")
        self.rows = rows
        self.prompts_per_step = prompts_per_step
        self.seed = seed
        self._orders: dict[int, list[int]] = {}

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self._orders:
            order = list(range(len(self.rows)))
            random.Random(f"{self.seed}/epoch/{epoch}").shuffle(order)
            self._orders = {epoch: order}
        return self._orders[epoch]

    def position(self, step: int) -> int:
        """Prompts consumed before step `step`."""
        return step * self.prompts_per_step

    def batch(self, step: int) -> list[dict]:
        """The rows of step `step`; a batch that crosses an epoch boundary continues in the next order."""
        rows = []
        for index in range(self.position(step), self.position(step + 1)):
            epoch, offset = divmod(index, len(self.rows))
            rows.append(self.rows[self._order(epoch)[offset]])
        return rows


def chat_messages(row: dict) -> list[dict]:
    """The chat of a prepared row: its shots as earlier user and assistant turns, then its prompt
    as the user turn to answer (the order lm-eval's multi-turn few-shot uses)."""
    turns = [
        [{"role": "user", "content": shot["user"]}, {"role": "assistant", "content": shot["assistant"]}]
        for shot in row.get("shots", [])
    ]
    return [message for turn in turns for message in turn] + [{"role": "user", "content": row["prompt"]}]


def encode_prompts(tokenizer, rows: list[dict]) -> list[list[int]]:
    """Token ids of each prepared row's chat (`chat_messages`), through the chat template when
    there is one; without one, the bare prompt (shots need a chat template)."""
    if tokenizer.chat_template:
        texts = [
            tokenizer.apply_chat_template(chat_messages(row), add_generation_prompt=True, tokenize=False)
            for row in rows
        ]
        return [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    if any(row.get("shots") for row in rows):
        raise ValueError("shots are earlier chat turns, and this tokenizer has no chat template")
    return [tokenizer.encode(row["prompt"]) for row in rows]


def stop_token_ids(
    tokenizer, model: str | Path | None = None, extra: tuple[str, ...] = (), revision: str | None = None
) -> tuple[int, ...]:
    """The ids that end a completion: the EOS, the generation config's EOS ids (of the model
    folder or Hub id `model`, when it has one), each end-of-turn token the chat template uses,
    and the `extra` tokens a config declares for the model. The first is the tokenizer's EOS
    (the padding of last resort); an extra token the tokenizer does not know is an error."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    if model is not None:
        from transformers import GenerationConfig

        try:
            configured = GenerationConfig.from_pretrained(model, revision=revision).eos_token_id
        except OSError:  # no generation_config.json
            configured = None
        ids += configured if isinstance(configured, list) else [configured] if configured is not None else []
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    vocabulary = tokenizer.get_vocab()
    ids += [vocabulary[token] for token in END_OF_TURN_TOKENS if token in template and token in vocabulary]
    unknown = [token for token in extra if token not in vocabulary]
    if unknown:
        raise ValueError(f"stop token {unknown[0]!r} is not in the tokenizer's vocabulary")
    ids += [vocabulary[token] for token in extra]
    unique = tuple(dict.fromkeys(ids))
    if not unique:
        raise ValueError("the tokenizer has no EOS token and its chat template no known end-of-turn token")
    return unique
