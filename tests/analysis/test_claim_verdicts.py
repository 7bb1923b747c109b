"""A claim's verdict from all its rows (klrl.analysis.family.claim_verdict), as docs/results.md's claims
block states and shows it: a claim about every β is reproduced only when every row is."""

import numpy as np
import pandas as pd
import pytest

from klrl.analysis.family import CLAIM_RULE, claim_verdict
from klrl.analysis.verdicts import COLUMNS
from klrl.reports.readme_blocks import claims_block


@pytest.mark.parametrize(
    ("rows", "verdict"),
    [
        (["reproduced", "reproduced"], "reproduced"),
        (["reproduced", "reproduced", "inconclusive"], "inconclusive"),
        (["inconclusive", "degenerate", "reproduced"], "inconclusive"),
        (["reproduced", "at floor"], "inconclusive"),
        (["contradicted", "inconclusive"], "contradicted"),
        (["reproduced", "contradicted", "inconclusive"], "mixed"),
        (["at floor", "at floor"], "at floor"),
        (["not in this grid"], "not in this grid"),
    ],
)
def test_a_claim_is_reproduced_only_when_every_row_is(rows, verdict):
    assert claim_verdict(rows) == verdict


def _row(beta: str, verdict: str, collapsed: str, p: float, adjusted: float) -> dict:
    return dict.fromkeys(COLUMNS, np.nan) | {
        "claim": "k3-reward-collapses",
        "paper": "K3 in the reward collapses at every β",
        "comparison": "collapse rate k3-reward(on) − k1-reward(on) > 0",
        "model": "tiny",
        "task": "arith",
        "domain": "in",
        "beta": beta,
        "lag": "",
        "test": "exact",
        "seeds": "11/11",
        "collapsed": collapsed,
        "effect": int(collapsed.split("/")[0]) / 11,
        "p": p,
        "p_adjusted": adjusted,
        "verdict": verdict,
        "reason": f"k3-reward(on) collapsed in {collapsed.split('/')[0]} of 11 seeds",
    }


def test_the_claims_block_states_the_rule_and_shows_each_claims_verdict_from_all_its_rows():
    """K3 in the reward reproduced at β 3 but not at β 0.1 (0 of 11 collapses): the claim is
    inconclusive, not reproduced."""
    claims = pd.DataFrame(
        [_row("0.1", "degenerate", "0/0", 1.0, np.nan), _row("3", "reproduced", "11/0", 2.84e-6, 2.84e-6)]
    )
    lines = claims_block("study", claims, "config/study.yaml", "1 h", "Cells trained.").splitlines()
    assert lines[3:6] == [
        f"Claims: {CLAIM_RULE}.",
        "",
        "- K3 in the reward collapses at every β: **inconclusive** (rows: 1 degenerate, 1 reproduced).",
    ]
    assert lines[7] == "Rows: 1 degenerate, 1 reproduced."
