"""Planted-effect studies of the mechanism claims, decided by the run's own code.

A `Shape` is a study as planned: the on-policy KL configurations, the β grid, the seeds, and per
configuration and β the true mean of each measure (the KL it attains, its J_β) with the seed SD.
`simulate` draws each cell's measurement from a normal around its mean, builds the files'
interface that klrl.analysis.tables.Results gives (cells with their tags, each one's
measurement) and decides the family with klrl.analysis.mechanism_claims.mechanism_tables, the
code a run's tables go through. The share of studies in which each claim reaches each verdict is
its power (where its effect is planted) or its false-decision rate (where it is not).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from klrl.analysis.mechanism_claims import MEASURES, mechanism_tables


@dataclass(frozen=True)
class Shape:
    """A planned study: per (kl, β) each measure's true mean; one seed SD per measure."""

    means: dict[tuple[str, float], dict[str, float]]  # (kl, β) → measure → mean ("none": β 0)
    seeds: int
    seed_sd: dict[str, float]


class PlantedStudy:
    """One synthetic study, read as klrl.analysis.mechanism_claims reads a run's results."""

    def __init__(self, shape: Shape, rng: np.random.Generator) -> None:
        self.cells, self._measured = {}, {}
        for (kl, beta), means in shape.means.items():
            for seed in range(shape.seeds):
                cell = f"tiny__{kl}__b{beta:g}__on__s{seed}"
                self.cells[cell] = {"model": "tiny", "kl": kl, "beta": beta, "policy": "on", "lag": 0, "seed": seed}
                self._measured[cell] = {m: means[m] + shape.seed_sd[m] * rng.standard_normal() for m in MEASURES}

    def mechanism(self, cell: str) -> dict:
        return self._measured[cell]


def verdicts_per_study(shape: Shape, studies: int, seed: int = 0) -> list[dict[str, str]]:
    """Each synthetic study's verdict of every claim (claim → verdict)."""
    rng = np.random.default_rng(seed)
    return [
        {claim["claim"]: claim["verdict"] for claim in mechanism_tables(PlantedStudy(shape, rng))[1]}
        for _ in range(studies)
    ]


def verdict_shares(studies: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    """Per claim, the share of the studies reaching each verdict."""
    shares: dict[str, dict[str, float]] = {}
    for study in studies:
        for claim, verdict in study.items():
            shares.setdefault(claim, {}).setdefault(verdict, 0.0)
            shares[claim][verdict] += 1 / len(studies)
    return shares
