"""Tests of klrl.grading, one file per module."""
