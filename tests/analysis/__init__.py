"""Tests of klrl.analysis, one file per module."""
