"""Evaluation through lm-evaluation-harness: the task template and its hooks, the harness call, the verb."""
