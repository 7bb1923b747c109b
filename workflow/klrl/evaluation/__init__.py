"""Evaluation through lm-evaluation-harness: this project's task YAMLs, the harness call, the verb."""
