# One figure per script in paper_figures/ (the modules they share are in paper_figures/helpers/),
# each reading only results/<experiment>/tables/; the figures then go to the grid's MLflow run. A figure is
# rebuilt when its script, a helper or a table changes (all are inputs, as relative paths, so
# moving the checkout changes nothing). Its report caption is its script's docstring
# (common.smk's script_caption).
FIGURES = sorted(glob_wildcards("paper_figures/{figure,[^/]+}.py").figure)
FIGURE_HELPERS = sorted(glob_wildcards("paper_figures/helpers/{helper,[^/]+}.py").helper)
CAPTIONS = {figure: script_caption(figure) for figure in FIGURES}  # every script has one, checked when the DAG is built


wildcard_constraints:
    figure="|".join(FIGURES),


localrules:
    figure,
    track_figures,


rule figure:
    input:
        script="paper_figures/{figure}.py",
        helpers=expand("paper_figures/helpers/{helper}.py", helper=FIGURE_HELPERS),
        tables=[
            str(LAYOUT.tables(name))
            for name in ("main.csv", "curves.csv", "scores.csv", "mechanism.csv", "toy_bias.csv")
        ],
    output:
        report(str(LAYOUT.figures("{figure}.png")), caption="../report/figures.rst", category="Figures"),
        str(LAYOUT.figures("{figure}.pdf")),
    params:
        tables=LAYOUT.tables(),
        folder=LAYOUT.figures(),
        caption=lambda wildcards: CAPTIONS[wildcards.figure],
    log:
        str(LAYOUT.log("figures", "{figure}")),
    benchmark:
        str(LAYOUT.benchmark("figures", "{figure}"))
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python {input.script} \
            --tables {params.tables} \
            --out {params.folder} \
            > {log} 2>&1
        """


rule figures:
    input:
        [str(LAYOUT.figures(f"{figure}.png")) for figure in FIGURES],


rule track_figures:
    input:
        figures=[str(LAYOUT.figures(f"{figure}.png")) for figure in FIGURES],
        runs=ancient(RUNS),
    output:
        str(LAYOUT.figures_marker()),
    log:
        str(LAYOUT.log("track_figures")),
    benchmark:
        str(LAYOUT.benchmark("track_figures"))
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl track-files \
            --mlflow-runs {input.runs} \
            --marker {output} \
            {input.figures} \
            > {log} 2>&1
        """
