"""What every part of klrl stands on: typed settings and their bounds, whole-or-absent files, where
a run's files live, folder locks, provenance, the learning-rate schedule. Imports no other part."""
