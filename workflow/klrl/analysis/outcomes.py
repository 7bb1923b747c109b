"""The training outcome of a cell, from its files, by one stated rule (Table 1's last column, `behaviour`).

    collapsed  the trainer stopped the cell (status `diverged`: a non-finite loss, or the
               collapse detector), or its final in-domain pass@1 is below half the base model's
    unstable   not collapsed, but its periodic in-domain pass@1 ended more than DROP below the
               best value it reached during training
    stable     neither: it ended within DROP of its best
    missing    the cell has not finished training

The periodic pass@1 is the trainer's (`periodic_eval/pass@1` in metrics.jsonl, the same held-out subset at
every evaluation, step 0 being the base); the final value is its last one.
"""

from __future__ import annotations

import math

DROP = 0.10
COLLAPSE_FRACTION = 0.5  # collapsed: pass@1 below this fraction of the base model's
LABELS = ("stable", "unstable", "collapsed", "missing")


def classify(status: str | None, curve: list[float], base: float | None = None) -> str:
    """The behaviour label of one cell, from its status and its periodic pass@1 in step order.

    >>> classify("completed", [0.4, 0.6, 0.7, 0.68])
    'stable'
    >>> classify("completed", [0.4, 0.6, 0.7, 0.45])
    'unstable'
    >>> classify("completed", [0.4, 0.3, 0.1, 0.05])
    'collapsed'
    >>> classify("diverged", [0.4, 0.5])
    'collapsed'
    """
    if status is None or status == "missing":
        return "missing"
    if status == "diverged":
        return "collapsed"
    values = [value for value in curve if value is not None and math.isfinite(value)]
    if not values:
        return "missing"
    base = values[0] if base is None else base
    final, best = values[-1], max(values)
    if below_collapse(final, base):
        return "collapsed"
    if final < best - DROP:
        return "unstable"
    return "stable"


def below_collapse(score: float, base: float) -> bool:
    """Whether a pass@1 is a collapse's: below COLLAPSE_FRACTION of the base model's."""
    return score < COLLAPSE_FRACTION * base
