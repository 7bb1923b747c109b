"""The statistics of a run: its tables from each cell's files, the paper's claims as declared
comparisons and their verdicts under the family of tests, the analysis plan fixed before the run,
and the simulations that size a study (power, coverage, collapse rates)."""
