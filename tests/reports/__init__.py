"""Tests of klrl.reports, one file per module."""
