"""Tests of klrl.core, one file per module."""
