# One script per figure in paper_figures/ (every .py there but the helpers the scripts import),
# each reading only {OUT}/tables/; the figures then go to the grid's MLflow run. A figure is
# rebuilt when its script, a helper or a table changes (all are inputs, as relative paths, so
# moving the checkout changes nothing). Its report caption is its script's docstring
# (common.smk's figure_caption).
FIGURE_HELPERS = ["style", "bars"]
FIGURES = sorted(set(glob_wildcards("paper_figures/{figure}.py").figure) - set(FIGURE_HELPERS))


wildcard_constraints:
    figure="|".join(FIGURES),


localrules:
    figure,
    track_figures,


rule figure:
    input:
        script="paper_figures/{figure}.py",
        helpers=expand("paper_figures/{helper}.py", helper=FIGURE_HELPERS),
        tables=[f"{OUT}/tables/main.csv", f"{OUT}/tables/curves.csv", f"{OUT}/tables/scores.csv", f"{OUT}/tables/toy_bias.csv"],
    output:
        report(f"{OUT}/figures/{{figure}}.png", caption="../report/figures.rst", category="Figures"),
        f"{OUT}/figures/{{figure}}.pdf",
    params:
        root=lambda wildcards: OUT,  # results/<experiment>
        caption=figure_caption,
    log:
        f"{OUT}/logs/figures/{{figure}}.log",
    benchmark:
        f"{OUT}/benchmarks/figures/{{figure}}.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python {input.script} \
            --tables {params.root}/tables \
            --out {params.root}/figures \
            > {log} 2>&1
        """


rule figures:
    input:
        expand(f"{OUT}/figures/{{figure}}.png", figure=FIGURES),


rule track_figures:
    input:
        figures=expand(f"{OUT}/figures/{{figure}}.png", figure=FIGURES),
        runs=ancient(RUNS),
    output:
        f"{OUT}/mlflow/figures.txt",
    log:
        f"{OUT}/logs/track_figures.log",
    benchmark:
        f"{OUT}/benchmarks/track_figures.tsv"
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
