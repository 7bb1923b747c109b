"""The learning-rate schedule shared by pretraining and RL: linear warm-up, then flat or cosine."""

from __future__ import annotations

import math


def lr_factor(step: int, warmup: int, total: int, cosine: bool) -> float:
    """Multiplier of the peak rate at `step`: (step+1)/warmup during warm-up; after it 1, or a
    cosine from 1 down to 0.1 at `total`.

    >>> [round(lr_factor(step, 2, 10, cosine=True), 3) for step in (0, 1, 2, 6, 10)]
    [0.5, 1.0, 1.0, 0.55, 0.1]
    >>> lr_factor(7, 2, 10, cosine=False)
    1.0
    """
    if step < warmup:
        return (step + 1) / warmup
    if not cosine:
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
