# Asking for results/<experiment>/cells/<typo>/... says which cells are close, instead of Snakemake's
# generic "no rule to produce" (the input function is common.smk's unknown_cell).
rule unknown_cell:
    input:
        unknown_cell,
    output:
        str(LAYOUT.cells() / "{unknown_cell}" / "{path}"),
    wildcard_constraints:
        unknown_cell="(?!(?:" + "|".join(re.escape(cell) for cell in CELLS) + ")/)[^/]+",
        path=".+",
