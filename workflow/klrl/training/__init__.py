"""RL training of one cell: configuration, rollouts, scoring, the loop, checkpoints, metrics."""
