"""klrl.analysis.outcomes: the training-outcome rule at its edges."""

from klrl.analysis.outcomes import classify


def test_behaviour_rule_edges():
    assert classify("missing", []) == "missing"
    assert classify("completed", [0.4, 0.5, 0.395]) == "unstable"  # 0.105 below its best
    assert classify("completed", [0.4, 0.5, 0.41]) == "stable"
    assert classify("completed", [0.4, 0.19], base=0.4) == "collapsed"
