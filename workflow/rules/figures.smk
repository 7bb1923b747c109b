# One script per figure in paper_figures/, each reading only results/tables/; the figures then
# go to the grid's MLflow run.

FIGURES = [
    "toy_bias",
    "k1_loss_beta",
    "k3_reward_collapse",
    "k3_loss_vs_k1_reward",
    "benchmark_bars",
    "both_placements",
    "off_policy_curves",
    "entropy_kl",
]


wildcard_constraints:
    figure="|".join(FIGURES),


localrules:
    figure,
    track_figures,


rule figure:
    input:
        "results/tables/main.csv",
        "results/tables/curves.csv",
        "results/tables/toy_bias.csv",
    output:
        report("paper_figures/{figure}.png", caption="../report/figures.rst", category="Figures"),
        "paper_figures/{figure}.pdf",
    params:
        script=lambda wildcards: f"{workflow.basedir}/paper_figures/{wildcards.figure}.py",
    log:
        "results/logs/figures/{figure}.log",
    benchmark:
        "results/benchmarks/figures/{figure}.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python {params.script} \
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
