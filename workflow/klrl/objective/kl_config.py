"""`KLConfig`: how the KL penalty enters the objective (estimator, placement, β, clamps, correction),
validated against the registry of klrl.objective.estimators; plain Python, no torch.

`klrl.grid.expansion` (and so the Snakefile) validates every cell's training settings with it when
Snakemake builds the DAG; keeping it free of torch keeps that fast. On import, every standard
configuration of the registry is checked to be a valid KLConfig (`check_standard_configs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from klrl.core.allowed import Allowed, first_refused, setting
from klrl.objective import estimators
from klrl.core.typed import check_fields


def check_choice(owner: str, name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{owner}.{name}: {value!r} is not one of {', '.join(allowed)}")


@dataclass(frozen=True)
class KLConfig:
    """How the KL penalty enters the objective. Validated on construction."""

    estimator: str = field(default="k1", metadata={"help": f"one of {tuple(estimators.ESTIMATORS)}"})
    placement: str = field(default="none", metadata={"help": f"one of {estimators.PLACEMENTS}"})
    beta: float = setting("penalty coefficient β ≥ 0", 0.0, allowed=Allowed(minimum=0))
    log_ratio_clamp: float | None = setting(
        "clamp δ_t to [−c, c] before the estimator", None, allowed=Allowed(exclusive_minimum=0)
    )
    value_clamp: float | None = setting(
        "clamp each K̂_t to [−c, c] (the paper's async runs: 10)", None, allowed=Allowed(exclusive_minimum=0)
    )
    correction: str = field(
        default="none", metadata={"help": f"off-policy correction, one of {('none', *estimators.CORRECTIONS)}"}
    )
    is_truncation: float | None = setting(
        "cap the correction's importance weight at c (biased when it acts)", None, allowed=Allowed(exclusive_minimum=0)
    )

    def __post_init__(self) -> None:
        check_fields(self, "KLConfig")
        check_choice("KLConfig", "estimator", self.estimator, tuple(estimators.ESTIMATORS))
        check_choice("KLConfig", "placement", self.placement, estimators.PLACEMENTS)
        check_choice("KLConfig", "correction", self.correction, ("none", *estimators.CORRECTIONS))
        if bad := first_refused(self):
            allowed = self.__dataclass_fields__[bad].metadata["allowed"]
            optional = " or None" if bad in KL_OPTIONS else ""
            raise ValueError(f"KLConfig.{bad}: {getattr(self, bad)!r} must be {allowed.describe()}{optional}")
        if self.placement == "none" and self.beta != 0:
            raise ValueError(
                f"KLConfig.beta: {self.beta} with no KL penalty (kl 'none') would be ignored; set beta to 0"
            )
        if self.placement != "none" and self.beta == 0:
            raise ValueError(f"KLConfig.beta: 0 with placement {self.placement!r} adds nothing; use placement 'none'")
        if self.correction == "token-is" and (
            self.placement != "loss" or not estimators.ESTIMATORS[self.estimator].unbiased_value
        ):
            unbiased = [name for name, estimator in estimators.ESTIMATORS.items() if estimator.unbiased_value]
            raise ValueError(
                "KLConfig.correction: 'token-is' weights an in-loss value-unbiased estimate; "
                f"it needs placement 'loss' and estimator {' or '.join(map(repr, unbiased))}"
            )
        if self.correction in ("sequence-is", "prefix-is") and (self.placement, self.estimator) != ("reward", "k1"):
            raise ValueError(
                f"KLConfig.correction: {self.correction!r} corrects K1's score-function term; "
                "it needs placement 'reward' and estimator 'k1'"
            )
        if self.is_truncation is not None and self.correction == "none":
            raise ValueError("KLConfig.is_truncation: set, but correction is 'none' so there is no weight to truncate")

    @property
    def name(self) -> str:
        """The standard name, e.g. 'k3-loss' or 'k1-reward-prefixis'."""
        if self.placement == "none":
            return "none"
        suffix = estimators.CORRECTIONS[self.correction].suffix if self.correction != "none" else None
        return f"{self.estimator}-{self.placement}" + (f"-{suffix}" if suffix else "")

    @classmethod
    def from_name(cls, name: str, beta: float = 0.0, **options: float | None) -> KLConfig:
        """Build a config from its standard name; β and the clamps are given separately."""
        parts = name.split("-") if name != "none" else []
        correction = "none"
        if len(parts) == 3:
            by_suffix = {correction.suffix: correction.name for correction in estimators.CORRECTIONS.values()}
            correction = by_suffix.get(parts[2], parts[2])
        if name != "none" and (
            len(parts) not in (2, 3)
            or parts[0] not in estimators.ESTIMATORS
            or parts[1] not in estimators.PENALTY_PLACEMENTS
        ):
            raise ValueError(
                f"unknown KL configuration {name!r}; standard names: {', '.join(estimators.STANDARD_CONFIGS)}"
            )
        if name == "none":
            return cls(beta=beta, **options)
        return cls(estimator=parts[0], placement=parts[1], beta=beta, correction=correction, **options)

    def settings(self) -> dict:
        """The form config files and saved configs use: the standard name, β and the options."""
        return {"name": self.name, "beta": self.beta} | {key: getattr(self, key) for key in KL_OPTIONS}

    @classmethod
    def from_settings(cls, values: dict, owner: str = "kl") -> KLConfig:
        """The inverse of `settings`; an unknown or missing key is an error naming it.

        >>> KLConfig.from_settings({"name": "k3-loss", "beta": 0.1, "value_clamp": 10}).value_clamp
        10.0
        """
        if not isinstance(values, dict):
            raise ValueError(f"{owner}: must be a mapping with name, beta and options ({', '.join(KL_OPTIONS)})")
        unknown = sorted(set(values) - {"name", "beta", *KL_OPTIONS})
        if unknown:
            raise ValueError(f"{owner}: unknown key {unknown[0]!r}; known keys: name, beta, {', '.join(KL_OPTIONS)}")
        if "name" not in values:
            raise ValueError(f"{owner}: missing 'name' (the KL configuration, e.g. k1-reward)")
        options = {key: value for key, value in values.items() if key in KL_OPTIONS}
        try:
            return cls.from_name(values["name"], beta=values.get("beta", 0.0), **options)
        except ValueError as error:
            raise ValueError(f"{owner}: {error}") from None


# The KLConfig fields that do not follow from the configuration's name (config files set them
# under `train.kl`; the grid adds the name and β of each cell).
KL_OPTIONS = ("log_ratio_clamp", "value_clamp", "is_truncation")


def check_standard_configs() -> None:
    """Every standard name is a valid configuration (a contradiction in klrl.objective.estimators fails on import, naming it)."""
    for name in estimators.STANDARD_CONFIGS:
        try:
            KLConfig.from_name(name, beta=0.0 if name == "none" else 1.0)
        except ValueError as error:
            raise estimators.RegistryError(
                f"klrl.objective.estimators: standard configuration {name!r} is not a valid KLConfig ({error})"
            ) from None


check_standard_configs()
