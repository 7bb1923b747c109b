"""Tests of klrl.toy, one file per module."""
