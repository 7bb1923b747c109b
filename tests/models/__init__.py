"""Tests of klrl.models, one file per module."""
