"""The paper's claims as declared comparisons between configurations (what is tested, not how).

Each claim (PAPER.md, "Which configuration gives which gradient" and "Off-policy") is a contrast
Σ w · (a configuration's summary) on the in-domain or the out-of-domain evaluation sets, with a
direction: `greater` / `less` than 0, or `equivalent` within ±margin. A direction is superiority:
the paper's "≥" is worded and tested as "ahead of" (> 0), which is the stronger claim; no
non-inferiority margin is assumed. Its test is `mean` (pass@1
of the seeds that did not collapse, klrl.analysis.contrasts) or `rate` (the share of seeds that
collapsed, an exact test on the counts: a claim about collapse or stability is one about how
often a run collapses, not about a mean that mixes collapsed and healthy seeds).

β and lag in a term: `each` gives one row per value common to every term's configuration;
`low` / `high` give one row per step between neighbouring such values, its lower and its higher
end (a claim about growth with β or with lag is tested at each step of the axis).
"""

from __future__ import annotations

from dataclasses import dataclass

from klrl.analysis.claim_family import COMBINES, Side

EQUIVALENCE_MARGIN = 0.03  # pass@1: "≈" means within ±0.03
TESTS = ("mean", "rate")


@dataclass(frozen=True)
class Term:
    weight: float
    kl: str  # a KL configuration, or "base" (the base model, no seeds)
    policy: str = "on"
    beta: str = "each"  # each | low | high (ignored for none and base)
    lag: str = "each"  # each | low | high (off-policy only)

    def label(self) -> str:
        if self.kl == "base":
            return "base"
        beta = "" if self.kl == "none" or self.beta == "each" else f"@β{self.beta}"
        lag = "" if self.policy == "on" or self.lag == "each" else f"@lag{self.lag}"
        return f"{self.kl}({self.policy}){beta}{lag}"


@dataclass(frozen=True)
class Claim:
    name: str
    paper: str  # the paper's statement
    terms: tuple[Term, ...]
    domain: str  # in | out
    direction: str  # greater | less | equivalent
    margin: float = 0.0
    test: str = "mean"  # mean | rate (collapse rate, two configurations)
    combine: str = "every"  # every | pooled: how its rows make its one test (klrl.analysis.claim_family)
    size: float = 0.0  # the effect it means, beyond 0 on its side ("≈": the margin)
    size_source: str = ""  # where the size comes from: the paper's figure or table, or a stated reading

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise ValueError(f"claim {self.name}: test {self.test!r} is not one of {', '.join(TESTS)}")
        if self.combine not in COMBINES:
            raise ValueError(f"claim {self.name}: combine {self.combine!r} is not one of {', '.join(COMBINES)}")
        self.side  # a size on the wrong side of 0 fails here, naming the claim
        if self.test == "rate" and (
            len(self.terms) != 2 or self.direction == "equivalent" or "base" in {t.kl for t in self.terms}
        ):
            raise ValueError(
                f"claim {self.name}: a rate claim compares two configurations' collapse rates in one direction"
            )

    @property
    def side(self) -> Side:
        """The claim's null (0; "≈": the margin) and declared size, for klrl.analysis.claim_family."""
        if self.direction == "equivalent":
            return Side("equivalent", self.margin, self.margin)
        try:
            return Side(self.direction, 0.0, self.size)
        except ValueError as error:
            raise ValueError(f"claim {self.name}: {error}") from None

    def comparison(self) -> str:
        text = " ".join(f"{'−' if t.weight < 0 else '+'} {t.label()}" for t in self.terms).removeprefix("+ ")
        text = f"collapse rate {text}" if self.test == "rate" else text
        return text + {"greater": " > 0", "less": " < 0", "equivalent": f" within ±{self.margin:g}"}[self.direction]


def _pair(a: str, b: str, policy: str = "on") -> tuple[Term, Term]:
    return Term(1, a, policy), Term(-1, b, policy)


def _growth(kl: str, control: str, axis: str, policy: str) -> tuple[Term, ...]:
    """(kl at high − kl at low) − (control at high − control at low) along β or lag."""

    def term(weight: float, name: str, end: str) -> Term:
        return Term(weight, name, policy, **{axis: end})

    return term(1, kl, "high"), term(-1, kl, "low"), term(-1, control, "high"), term(1, control, "low")


CLAIMS = (
    Claim(
        "k1-loss-worsens-with-beta",
        "K1 in the loss is unstable, worse as β grows (beyond what any penalty costs)",
        _growth("k1-loss", "k1-reward", "beta", "on"),
        "in",
        "less",
        combine="pooled",
        size=-0.10,
        size_source="a reading: 0.10 lower per step of the β grid beyond K1 in the reward's change (the paper: pass@1 below 0.1 from β 0.3, a larger drop)",
    ),
    Claim(
        "k1-loss-collapses",
        "K1 in the loss is unstable: it collapses more often than K1 in the reward",
        _pair("k1-loss", "k1-reward"),
        "in",
        "greater",
        test="rate",
        combine="pooled",
        size=0.5,
        size_source="a reading of 'unstable': a collapse rate at least 0.5 above K1 in the reward's",
    ),
    Claim(
        "k3-reward-collapses",
        "K3 in the reward collapses at every β (more often than K1 in the reward)",
        _pair("k3-reward", "k1-reward"),
        "in",
        "greater",
        test="rate",
        size=0.5,
        size_source="the paper: collapse at every β tried; read as a collapse rate at least 0.5 above K1 in the reward's",
    ),
    Claim(
        "k1-reward-beats-k3-loss-in",
        "K1 in the reward ahead of K3 in the loss, in domain (the paper's ≥, tested as superiority)",
        _pair("k1-reward", "k3-loss"),
        "in",
        "greater",
        combine="pooled",
        size=0.04,
        size_source="half the paper's out-of-domain gap (it gives no in-domain one)",
    ),
    Claim(
        "k1-reward-beats-k3-loss-out",
        "K1 in the reward ahead of K3 in the loss, out of domain (the paper's ≥, tested as superiority)",
        _pair("k1-reward", "k3-loss"),
        "out",
        "greater",
        size=0.08,
        size_source="the paper's Qwen2.5-7B college physics: 0.508 against 0.429",
    ),
    Claim(
        "k3-both-matches-k1-reward",
        "K3 in both ≈ K1 in the reward",
        _pair("k3-both", "k1-reward"),
        "in",
        "equivalent",
        EQUIVALENCE_MARGIN,
        size_source="a reading of the paper's 'matches': within ±0.03 pass@1 (it gives no margin)",
    ),
    Claim(
        "k1-both-matches-k1-reward",
        "K1 in both ≈ K1 in the reward",
        _pair("k1-both", "k1-reward"),
        "in",
        "equivalent",
        EQUIVALENCE_MARGIN,
        size_source="a reading of the paper's 'matches': within ±0.03 pass@1 (it gives no margin)",
    ),
    Claim(
        "kl-stabilises-off-policy",
        "off-policy, no KL collapses more often than K1 in the reward",
        _pair("none", "k1-reward", "off"),
        "in",
        "greater",
        test="rate",
        combine="pooled",
        size=0.5,
        size_source="a reading of 'collapses': a collapse rate at least 0.5 above the other's",
    ),
    Claim(
        "k3-loss-stabilises-off-policy",
        "off-policy, no KL collapses more often than K3 in the loss",
        _pair("none", "k3-loss", "off"),
        "in",
        "greater",
        test="rate",
        combine="pooled",
        size=0.5,
        size_source="a reading of 'collapses': a collapse rate at least 0.5 above the other's",
    ),
    Claim(
        "k1-loss-collapses-off-policy",
        "off-policy, K1 in the loss collapses more often than K1 in the reward",
        _pair("k1-loss", "k1-reward", "off"),
        "in",
        "greater",
        test="rate",
        combine="pooled",
        size=0.5,
        size_source="a reading of 'collapses': a collapse rate at least 0.5 above the other's",
    ),
    Claim(
        "k1-loss-falls-behind-off-policy",
        "off-policy, K1 in the loss falls behind K1 in the reward (seeds that did not collapse)",
        _pair("k1-loss", "k1-reward", "off"),
        "in",
        "less",
        combine="pooled",
        size=-0.05,
        size_source="a reading: 0.05 lower",
    ),
    Claim(
        "k1-reward-ahead-off-policy",
        "off-policy, K1 in the reward slightly ahead of K3 in the loss",
        _pair("k1-reward", "k3-loss", "off"),
        "in",
        "greater",
        combine="pooled",
        size=0.03,
        size_source="'slightly ahead', read as the ±0.03 the project calls a difference",
    ),
    Claim(
        "k1-loss-collapses-more-with-lag",
        "off-policy, K1 in the loss collapses more often as the lag grows",
        (Term(1, "k1-loss", "off", lag="high"), Term(-1, "k1-loss", "off", lag="low")),
        "in",
        "greater",
        test="rate",
        size=0.25,
        size_source="a reading: a collapse rate 0.25 higher at each step of the lag grid",
    ),
    Claim(
        "k1-loss-degrades-with-lag",
        "off-policy biased K1 in the loss degrades as the lag grows (beyond K1 in the reward)",
        _growth("k1-loss", "k1-reward", "lag", "off"),
        "in",
        "less",
        combine="pooled",
        size=-0.05,
        size_source="a reading: 0.05 lower per step of the lag grid beyond K1 in the reward's change",
    ),
)
