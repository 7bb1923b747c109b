"""Tests of klrl.objective, one file per module."""
