"""Documents generated from the code or a run: the README's result blocks, config/README.md and
the schema's generated part, the MLflow UI's screenshots."""
