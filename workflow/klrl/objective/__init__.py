"""The objective: the KL estimators and what their gradients estimate (`estimators`,
`gradient_claims`), a KL configuration (`kl_config`), the per-token KL terms (`kl`), advantages,
policy terms and aggregation (`policy_terms`, names in `choices`), the engine-mismatch weights
(`engine_correction`) and the batch loss they make (`loss`). It imports nothing from training,
tracking or the grid; the trainer and the toy study both call it."""
