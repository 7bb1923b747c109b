"""A workflow config made into cells, as Snakemake reads it: the config's checks and the schema's
generated part, the expansion into cells and their jobs, the grid's biased KL settings stated when
it loads, and Snakemake's locks after a kill. Torch-free: it runs when Snakemake builds the DAG."""
