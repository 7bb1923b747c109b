"""A claim's verdict from its one test (klrl.analysis.claim_table), as docs/results.md's claims block
states and shows it: a claim about every β is reproduced only when every row shows it, and one β
bounded short of its size makes it absent at its size."""

import numpy as np
import pandas as pd

from klrl.analysis.claim_family import NOT_TESTABLE
from klrl.analysis.claim_table import COLUMNS as CLAIM_COLUMNS, claim_table
from klrl.analysis.claims import CLAIMS
from klrl.analysis.family import CLAIM_RULE
from klrl.analysis.rate_tests import RateRow
from klrl.analysis.verdicts import COLUMNS
from klrl.reports.readme_blocks import claims_block

K3_REWARD = next(claim for claim in CLAIMS if claim.name == "k3-reward-collapses")


def _row(beta: str, collapsed: int) -> dict:
    tested = RateRow(((collapsed, 11, 0, 11),))
    lo, hi = tested.interval(0.95)
    return dict.fromkeys(COLUMNS, np.nan) | {
        "claim": K3_REWARD.name,
        "paper": K3_REWARD.paper,
        "comparison": K3_REWARD.comparison(),
        "model": "tiny",
        "task": "arith",
        "domain": "in",
        "beta": beta,
        "lag": "",
        "test": "exact",
        "seeds": "11/11",
        "collapsed": f"{collapsed}/0",
        "effect": tested.effect,
        "ci_level": 0.95,
        "ci_lo": lo,
        "ci_hi": hi,
        "p": tested.p_above(0),
        "verdict": "descriptive",
        "reason": f"k3-reward(on) collapsed in {collapsed} of 11 seeds",
        "_test": tested,
    }


def _decide(collapses: dict[str, int]) -> tuple[list[dict], dict]:
    rows = [_row(beta, n) for beta, n in collapses.items()]
    [claim] = claim_table(rows, (K3_REWARD,))
    return rows, claim


def test_collapses_at_every_beta_is_reproduced_only_when_every_beta_shows_it():
    assert _decide({"1": 11, "3": 11})[1]["verdict"] == "reproduced"
    assert _decide({"0.1": 0, "1": 11, "3": 11})[1]["verdict"] == "absent at its size"


def test_the_study_shape_k3_in_the_reward_is_absent_at_its_size_with_its_bound():
    """0, 5 and 8 of 11 seeds against 0 of 11 (the 11-seed study): β 0.1 bounds the rate
    difference below 0.5, so the universal claim, as meant, is absent."""
    _, claim = _decide({"0.1": 0, "1": 5, "3": 8})
    assert claim["verdict"] == "absent at its size"
    bound = float(claim["reason"].split()[2])
    assert 0.24 < bound < 0.5


def test_the_claims_block_states_the_rule_and_shows_each_claims_verdict_then_its_rows():
    rows, claim = _decide({"0.1": 0, "3": 11})
    claims = pd.DataFrame([dict.fromkeys(CLAIM_COLUMNS, np.nan) | claim], columns=CLAIM_COLUMNS)
    frame = pd.DataFrame([{k: v for k, v in row.items() if k != "_test"} for row in rows], columns=COLUMNS)
    lines = claims_block("study", claims, frame, "config/study.yaml", "1 h", "Cells trained.").splitlines()
    assert lines[3:5] == [f"Claims: {CLAIM_RULE}.", ""]
    assert lines[5].startswith(
        "- K3 in the reward collapses at every β (more often than K1 in the reward) (tiny): **absent at its size** (rate, every over 2 rows: "
    )
    assert lines[7] == "Rows, descriptive: 2 descriptive."
    assert lines[9].startswith(
        f"- {K3_REWARD.paper}: {K3_REWARD.comparison()} on arith (in domain), β 0.1: difference of collapse rates +0.000"
    )


def test_the_claims_block_counts_in_its_family_only_the_claims_tested():
    """A claim declared not testable at this scale, or not in the grid, is outside the family the
    header counts; the declared ones are named beside it."""
    rows, claim = _decide({"0.1": 0, "3": 11})
    verdicts = (claim["verdict"], NOT_TESTABLE, NOT_TESTABLE, "not in this grid")
    claims = pd.DataFrame(
        [dict.fromkeys(CLAIM_COLUMNS, np.nan) | claim | {"verdict": verdict} for verdict in verdicts],
        columns=CLAIM_COLUMNS,
    )
    frame = pd.DataFrame([{k: v for k, v in row.items() if k != "_test"} for row in rows], columns=COLUMNS)
    header = claims_block("study", claims, frame, "config/study.yaml", "1 h", "Cells trained.").splitlines()[1]
    assert f"The family: 1 claim tested (2 more declared {NOT_TESTABLE}, outside it), " in header
    alone = claims.iloc[:1]
    header = claims_block("study", alone, frame, "config/study.yaml", "1 h", "Cells trained.").splitlines()[1]
    assert "The family: 1 claim tested, " in header
