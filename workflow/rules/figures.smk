# One script per figure in paper_figures/ (every .py there but the helpers the scripts import),
# each reading only results/tables/; the figures then go to the grid's MLflow run. A figure is
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
        tables=["results/tables/main.csv", "results/tables/curves.csv", "results/tables/scores.csv", "results/tables/toy_bias.csv"],
    output:
        report("paper_figures/{figure}.png", caption="../report/figures.rst", category="Figures"),
        "paper_figures/{figure}.pdf",
    params:
        caption=figure_caption,
    log:
        "results/logs/figures/{figure}.log",
    benchmark:
        "results/benchmarks/figures/{figure}.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python {input.script} \
            --tables results/tables \
            --out paper_figures \
            > {log} 2>&1
        """


rule figures:
    input:
        expand("paper_figures/{figure}.png", figure=FIGURES),


rule track_figures:
    input:
        figures=expand("paper_figures/{figure}.png", figure=FIGURES),
        runs=ancient(RUNS),
    output:
        f"results/mlflow/{config['experiment']}.figures.txt",
    log:
        f"results/logs/track_figures/{config['experiment']}.log",
    benchmark:
        f"results/benchmarks/track_figures/{config['experiment']}.tsv"
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
