"""The family of claims (klrl.analysis.claim_family) and the mechanism claims decided by it, by
exact values and by planted-effect studies through the run's own code (klrl.analysis.mechanism_power)."""

import numpy as np
import pytest

from klrl.analysis.claim_family import Side, combine, decide_claims, shaffer_holm, verdict, welch
from klrl.analysis.contrasts import Contrast
from klrl.analysis.mechanism_claims import MECHANISM_CLAIMS, SIZES, MechanismSizes
from klrl.analysis.mechanism_power import Shape, falsely_decided, verdict_shares, verdicts_per_study

BETAS = (0.1, 1.0, 3.0)
KLS = ("k1-reward", "k3-loss", "k1-both", "k3-both", "k1-loss", "k3-reward")
SD = {"kl_reverse": 0.08, "objective": 0.05}


def _shape(kl_reverse, objective=lambda kl, beta: 0.5, seeds: int = 4) -> Shape:
    means = {("none", 0.0): {"kl_reverse": 1.0, "objective": 0.5}}
    for kl in KLS:
        for beta in BETAS:
            means[(kl, beta)] = {"kl_reverse": kl_reverse(kl, beta), "objective": objective(kl, beta)}
    return Shape(means, seeds, SD)


def test_under_the_null_the_family_of_claims_errs_in_at_most_5_percent_of_studies():
    studies = verdicts_per_study(_shape(lambda kl, beta: 1.0), 300, seed=1)
    assert np.mean([falsely_decided(study) for study in studies]) <= 0.05


def test_a_planted_effect_at_every_beta_is_reproduced_and_the_predicted_absences_hold():
    lowered = {"k1-reward": 0.5, "k3-loss": 0.4, "k1-both": 0.5, "k3-both": 0.5}
    shares = verdict_shares(
        verdicts_per_study(_shape(lambda kl, beta: lowered.get(kl, 1.6), lambda kl, beta: 0.5), 100, seed=2)
    )
    for kl in lowered:
        assert shares[f"kl-{kl}-lowers"].get("reproduced", 0) >= 0.8
    for kl in ("k1-loss", "k3-reward"):
        assert shares[f"kl-{kl}-does-not-lower"].get("reproduced", 0) >= 0.8


def test_a_universal_claim_with_one_beta_at_the_null_is_not_reproduced():
    shape = _shape(lambda kl, beta: 1.0 if (kl == "k1-reward" and beta == 0.1) else 0.5)
    shares = verdict_shares(verdicts_per_study(shape, 100, seed=3))
    assert shares["kl-k1-reward-lowers"].get("reproduced", 0) <= 0.05
    assert shares["kl-k3-loss-lowers"].get("reproduced", 0) >= 0.8


def test_a_claim_bounded_short_of_its_size_is_absent_at_its_size():
    """K1 in the reward lowers the KL by 0.02 nats, a tenth of the 0.2 the claim means."""
    shape = _shape(lambda kl, beta: 0.98 if kl == "k1-reward" else 0.5, seeds=10)
    shares = verdict_shares(verdicts_per_study(shape, 100, seed=4))
    assert shares["kl-k1-reward-lowers"].get("absent at its size", 0) >= 0.8


def test_declared_sizes_are_the_ones_a_study_decides_its_claims_at():
    """KL(π‖πref) lowered by 2 nats from no KL's 6, at a seed SD of 0.5: reproduced at the tiny
    model's 0.5 nats and at a declared 1.5; at a declared 3 (the half of 6) reproduced but below
    that size."""
    shape = _shape(lambda kl, beta: 4.0 if kl == "k1-reward" else 6.0, seeds=8)
    shape = Shape({**shape.means, ("none", 0.0): {"kl_reverse": 6.0, "objective": 0.5}}, 8, {**SD, "kl_reverse": 0.5})
    for lower, expected in ((SIZES.lower, "reproduced"), (1.5, "reproduced"), (3.0, "reproduced, below its size")):
        sizes = MechanismSizes(lower, SIZES.per_step, SIZES.objective_gap, "a test's reading")
        planted = Shape(shape.means, shape.seeds, shape.seed_sd, sizes)
        shares = verdict_shares(verdicts_per_study(planted, 100, seed=5))
        assert shares["kl-k1-reward-lowers"].get(expected, 0) >= 0.8, (lower, shares["kl-k1-reward-lowers"])


def test_a_plan_records_the_sizes_its_config_declares_and_none_it_does_not():
    from klrl.analysis.preregistration import plan_of

    cells = [{"model": "m", "kl": kl, "beta": 1.0, "policy": "on", "lag": 0, "seed": 0} for kl in ("none", "k1-reward")]
    default = plan_of(cells)
    declared = {"lower": 3.0, "per_step": 1.5, "objective_gap": 0.2, "reading": "to at most half of 6 nats"}
    plan = plan_of(cells, None, declared)
    assert "mechanism_sizes" not in default and plan["mechanism_sizes"] == dict(sorted(declared.items()))
    sizes = {claim["name"]: (claim["size"], claim["size_source"]) for claim in plan["mechanism_claims"]}
    assert sizes["kl-k1-reward-lowers"] == (-3.0, "a reading: lower by 3 nats, to at most half of 6 nats")
    assert sizes["kl-k3-loss-falls-with-beta"][0] == -1.5 and sizes["objective-k1-reward-above-k1-loss"][0] == 0.2
    assert {c["name"]: c["size"] for c in default["mechanism_claims"]}["kl-k1-reward-lowers"] == -SIZES.lower


def test_the_intersection_takes_the_largest_row_p_and_bonferroni_for_its_size():
    side = Side("less", 0.0, -SIZES.lower)
    rows = [Contrast(-0.5, 0.1, 10), Contrast(-0.15, 0.1, 10), Contrast(-0.6, 0.1, 10)]
    test = combine(side, "every", rows)
    assert test.p_present == pytest.approx(rows[1].p_below(0.0))
    assert test.p_size == pytest.approx(3 * rows[1].p_above(-SIZES.lower))
    assert test.within == 3


def test_the_pooled_test_is_the_inverse_variance_mean_of_every_stratum():
    side = Side("less", 0.0, -0.1)
    rows = [Contrast(-0.3, 0.1, 8), Contrast(0.3, 0.2, 5), Contrast(-0.2, 0.1, 12)]
    test = combine(side, "pooled", rows)
    weights = np.array([100.0, 25.0, 100.0])
    assert test.effect == pytest.approx(np.dot(weights, [-0.3, 0.3, -0.2]) / weights.sum())
    assert test.bounding.se == pytest.approx(1 / np.sqrt(weights.sum()))
    assert test.bounding.df == 5


def test_shaffer_counts_claims_not_hypotheses():
    """Four claims: at each step the multiplier is the claims with a hypothesis left, so the first
    step is at α/4 (Holm over eight hypotheses would be α/8)."""
    pairs = [(0.01, 0.9), (0.012, 0.8), (0.4, 0.011), (0.3, 0.5)]
    adjusted = shaffer_holm(pairs)
    assert adjusted[0][0] == pytest.approx(0.04)
    assert adjusted[2][1] == pytest.approx(max(0.04, 4 * 0.011))
    assert adjusted[2][2] == 4


def test_welch_has_satterthwaites_degrees_of_freedom():
    first, second = np.array([1.0, 1.2, 0.9, 1.1]), np.array([0.5, 0.4])
    tested = welch([(1, first), (-1, second)])
    shares = (first.var(ddof=1) / 4, second.var(ddof=1) / 2)
    assert tested.effect == pytest.approx(first.mean() - second.mean())
    assert tested.se == pytest.approx(np.sqrt(sum(shares)))
    assert tested.df == pytest.approx(sum(shares) ** 2 / (shares[0] ** 2 / 3 + shares[1] ** 2 / 1))


def test_verdict_names_the_bound_and_calls_the_wrong_side_contradicted():
    side = Side("greater", 0.0, 0.05)
    below = combine(side, "pooled", [Contrast(-0.2, 0.03, 20)])
    adjusted = (1.0, below.p_size, 1)
    assert verdict(below, adjusted, side)[0] == "contradicted"
    short = combine(side, "pooled", [Contrast(0.0, 0.01, 20)])
    decided, reason = verdict(short, (1.0, short.p_size, 1), side)
    assert decided == "absent at its size" and reason.startswith("at most 0.0")


def test_every_mechanism_claim_names_the_gradient_that_predicts_it():
    predicted = {claim.name: claim.predicted_by() for claim in MECHANISM_CLAIMS}
    assert predicted["kl-k1-loss-does-not-lower"] == "k1-loss: zero"
    assert predicted["kl-k3-loss-lowers"] == "k3-loss: token-forward-kl"
    assert predicted["kl-k1-reward-lowers"] == "k1-reward: sequence-reverse-kl"


def test_the_mechanism_block_is_generated_from_the_claims_table(tmp_path):
    """aggregate's and the published tables' mechanism_claims.csv, as readme-results writes it
    into a page that has the block."""
    import pandas as pd

    from klrl.analysis.mechanism_claims import CLAIM_COLUMNS, mechanism_tables
    from klrl.analysis.mechanism_power import PlantedStudy
    from klrl.analysis.claim_table import COLUMNS as CLAIMS_TABLE
    from klrl.analysis.verdicts import COLUMNS
    from klrl.reports.readme_blocks import rewrite_readme

    lowered = {"k1-reward": 0.5, "k3-loss": 0.4, "k1-both": 0.5, "k3-both": 0.5}
    study = PlantedStudy(_shape(lambda kl, beta: lowered.get(kl, 1.6)), np.random.default_rng(5))
    rows, claims = mechanism_tables(study)
    tables = tmp_path / "tables"
    tables.mkdir()
    pd.DataFrame(claims, columns=CLAIM_COLUMNS).to_csv(tables / "mechanism_claims.csv", index=False)
    pd.DataFrame(columns=CLAIMS_TABLE).to_csv(tables / "claims.csv", index=False)
    pd.DataFrame(columns=COLUMNS).to_csv(tables / "claim_rows.csv", index=False)
    page = tmp_path / "results.md"
    marks = "<!-- {0}:toy:begin -->\nold\n<!-- {0}:toy:end -->\n"
    page.write_text(marks.format("claims") + "between\n" + marks.format("mechanism"))
    rewrite_readme(page, tables, "toy", "config/toy.yaml", "1 min", "abc")
    text = page.read_text()
    assert "\nbetween\n" in text
    block = text[text.index("<!-- mechanism:toy:begin -->") :]
    lines = [line for line in block.splitlines() if line.startswith("- ")]
    assert len(lines) == len(claims) == 11
    assert lines[0].startswith("- K1 in the reward holds KL(π‖πref) below no KL's at every β (tiny): **reproduced**")
    assert "predicted by k1-loss: zero" in next(line for line in lines if "K1 in the loss does not" in line)


def test_a_claim_the_plan_declares_not_testable_is_reported_so_and_left_out_of_the_family():
    side = Side("greater", 0.0, 0.1)
    rows = [Contrast(0.2, 0.08, 10)]
    alone = decide_claims([(side, "pooled", rows)])
    with_declared = decide_claims([(side, "pooled", rows), (side, "pooled", rows)], [None, 14])
    assert with_declared[1]["verdict"] == "not testable at this scale"
    assert "14 or more seeds per configuration" in with_declared[1]["reason"]
    assert with_declared[0]["p_present_adjusted"] == pytest.approx(alone[0]["p_present_adjusted"])


def test_the_plan_records_what_it_declares_not_testable_and_refuses_an_unknown_claim():
    from klrl.analysis.preregistration import plan_of

    cells = [{"model": "tiny", "kl": "k1-reward", "beta": 1.0, "policy": "on", "lag": 0, "seed": 0}]
    assert plan_of(cells, {"k3-reward-collapses": 30})["not_testable"] == {"k3-reward-collapses": 30}
    with pytest.raises(ValueError, match="not_testable: no claim named k9-nowhere"):
        plan_of(cells, {"k9-nowhere": 3})
