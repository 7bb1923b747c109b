"""MLflow, the mirror of a grid's files: its experiment and runs (`klrl track-grid`), the run a job
logs into, each cell attempt's run, and runs that killed jobs left RUNNING ended by what the files
say (`klrl track-reconcile`); the tracking server on PostgreSQL for many concurrent jobs (`klrl
tracking-server`), its load check (`klrl tracking-load`) and the UI's address of a config's runs
(`klrl ui`). Nothing here is read back by aggregation: the files under results/<experiment>/ are
the record."""
