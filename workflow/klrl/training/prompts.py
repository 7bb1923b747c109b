"""Which prompts each step trains on: a seeded permutation per epoch, a function of the step.

Because the batch of step t is computed from (seed, t) alone, a resumed run sees exactly
the data an uninterrupted one would; the checkpoint records the position for reference.
"""

from __future__ import annotations

import random


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


def encode_prompts(tokenizer, prompts: list[str]) -> list[list[int]]:
    """Token ids of each prompt as a user turn, through the chat template when there is one."""
    if tokenizer.chat_template:
        prompts = [
            tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
            for p in prompts
        ]
        return [tokenizer.encode(p, add_special_tokens=False) for p in prompts]
    return [tokenizer.encode(p) for p in prompts]
