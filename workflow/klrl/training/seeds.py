"""Seeded random generators, one per purpose and step, the same in every process."""

from __future__ import annotations

import hashlib

import torch


def seeded_generator(*keys: object) -> torch.Generator:
    """A CPU generator seeded from the keys (e.g. seed, purpose and step).

    >>> torch.rand(1, generator=seeded_generator(0, "rollout", 1)).item() == torch.rand(1, generator=seeded_generator(0, "rollout", 1)).item()
    True
    """
    digest = hashlib.sha256("/".join(map(str, keys)).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)
