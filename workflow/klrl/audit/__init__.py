"""`klrl audit`: another RL library's own KL code, driven on the tabular toy policy, its exact expected gradient."""
