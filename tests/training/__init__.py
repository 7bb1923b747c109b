"""Tests of klrl.training, one file per module."""
