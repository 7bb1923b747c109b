"""Tests of klrl.tracking, one file per module."""
