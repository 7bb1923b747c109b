"""Tests of klrl.grid, one file per module."""
