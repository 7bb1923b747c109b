"""RL training of one cell: configuration, rollouts, scoring, the loop, checkpoints, metrics, and
data-parallel processes (FSDP under torchrun)."""
