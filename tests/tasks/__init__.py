"""Tests of klrl.tasks, one file per module."""
