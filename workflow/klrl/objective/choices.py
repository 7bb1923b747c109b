"""The names a config gives the policy side of the objective, without torch (the grid and the
config checks read them): each advantage estimator (`klrl.objective.policy_terms.advantages`)
and each aggregation of token terms (`klrl.objective.policy_terms.normaliser`)."""

ADVANTAGES = ("rloo", "group-mean")
AGGREGATIONS = ("seq-sum", "token-mean")
