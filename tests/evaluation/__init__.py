"""Tests of klrl.evaluation, one file per module."""
