"""Planted-effect studies of the mechanism claims, decided by the run's own code.

A `Shape` is a study as planned: the on-policy KL configurations, the β grid, the seeds, and per
configuration and β the true mean of each measure (the KL it attains, its J_β) with the seed SD.
`simulate` draws each cell's measurement from a normal around its mean, builds the files'
interface that klrl.analysis.tables.Results gives (cells with their tags, each one's
measurement) and decides the family with klrl.analysis.mechanism_claims.mechanism_tables, the
code a run's tables go through. The share of studies in which each claim reaches each verdict is
its power (where its effect is planted) or its false-decision rate (where it is not).
`power_rows` plans a study: every claim's effect at its declared size, the seed SD of a pilot's
`mechanism.csv` (`pooled_seed_sd`), and with no effect anywhere the family's false decisions
(`klrl power mechanism`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from klrl.analysis.mechanism_claims import MEASURES, SIZES, MechanismSizes, mechanism_tables


@dataclass(frozen=True)
class Shape:
    """A planned study: per (kl, β) each measure's true mean; one seed SD per measure."""

    means: dict[tuple[str, float], dict[str, float]]  # (kl, β) → measure → mean ("none": β 0)
    seeds: int
    seed_sd: dict[str, float]
    sizes: MechanismSizes = SIZES  # the claims' declared sizes, which the study decides them at


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
        {claim["claim"]: claim["verdict"] for claim in mechanism_tables(PlantedStudy(shape, rng), sizes=shape.sizes)[1]}
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


def at_declared_sizes(
    betas: list[float], seed_sd: dict[str, float], seeds: int, base_kl: float = 1.0, sizes: MechanismSizes = SIZES
) -> Shape:
    """Every mechanism claim's effect planted at exactly its declared size: the configurations
    that lower the KL lower it by `sizes.lower` at the smallest β and `sizes.per_step` more at each
    larger one, those that do not attain no KL's KL, and K1 in the reward's J_β is
    `sizes.objective_gap` above the rest."""
    means = {("none", 0.0): {"kl_reverse": base_kl, "objective": 0.0}}
    for step, beta in enumerate(sorted(betas)):
        for kl in ("k1-reward", "k3-loss"):
            means[(kl, beta)] = {"kl_reverse": base_kl - sizes.lower - sizes.per_step * step, "objective": 0.0}
        for kl in ("k1-both", "k3-both"):
            means[(kl, beta)] = {"kl_reverse": base_kl - sizes.lower, "objective": 0.0}
        for kl in ("k1-loss", "k3-reward"):
            means[(kl, beta)] = {"kl_reverse": base_kl, "objective": 0.0}
        means[("k1-reward", beta)]["objective"] = sizes.objective_gap
    return Shape(means, seeds, seed_sd, sizes)


def pooled_seed_sd(measured: pd.DataFrame) -> dict[str, float]:
    """Each measure's seed SD pooled over the configurations of a run's `mechanism.csv` (each
    configuration's variance weighted by its seeds − 1)."""
    sds = {}
    for measure in MEASURES:
        groups = measured.groupby(["model", "kl", "beta", "policy"])[measure]
        df = (groups.count() - 1).clip(lower=0)
        if df.sum() == 0:
            raise ValueError(f"{measure}: no configuration has 2 seeds to take a seed SD from")
        sds[measure] = float(np.sqrt((groups.var(ddof=1).fillna(0) * df).sum() / df.sum()))
    return sds


def power_rows(betas: list[float], seed_sd: dict[str, float], seeds: list[int], studies: int, seed: int = 0):
    """Per seed count, each claim's power at its declared size (the share of studies that
    reproduce it), and the family's false-decision rate with no effect anywhere."""
    rows = []
    for n in seeds:
        shares = verdict_shares(verdicts_per_study(at_declared_sizes(betas, seed_sd, n), studies, seed))
        null = verdicts_per_study(Shape(_null_means(betas), n, seed_sd), studies, seed + 1)
        false = float(np.mean([falsely_decided(study) for study in null]))
        for claim, tally in shares.items():
            rows.append({"seeds": n, "claim": claim, "power": tally.get("reproduced", 0.0), "null_family": false})
    return rows


def _null_means(betas: list[float]) -> dict:
    means = {("none", 0.0): {"kl_reverse": 1.0, "objective": 0.0}}
    kls = ("k1-reward", "k3-loss", "k1-both", "k3-both", "k1-loss", "k3-reward")
    means |= {(kl, beta): {"kl_reverse": 1.0, "objective": 0.0} for kl in kls for beta in betas}
    return means


def falsely_decided(study: dict[str, str]) -> bool:
    """With every configuration at no KL's KL and J_β: a lowering, a fall or a higher J_β
    reproduced, or a "does not lower" found absent at its size, is false."""
    for claim, decided in study.items():
        if "does-not-lower" in claim:
            if decided in ("absent at its size", "contradicted"):
                return True
        elif decided.startswith("reproduced"):
            return True
    return False
