# Tables from the files under results/ (never from MLflow), logged to the grid's parent run.


localrules:
    aggregate,


rule aggregate:
    input:
        cells=expand("results/cells/{cell}/eval/results.json", cell=CELLS),
        bases=expand("results/base/{model}/eval/results.json", model=BASE_TASKS),
        toy="results/toy/bias.csv",
        runs=ancient(RUNS),
    output:
        report("results/tables/main.csv", caption="../report/main.rst", category="Tables"),
        report("results/tables/table1.csv", caption="../report/table1.rst", category="Tables"),
        report("results/tables/paper_comparison.csv", caption="../report/paper_comparison.rst", category="Tables"),
        report("results/tables/table2.csv", caption="../report/table2.rst", category="Tables"),
        report("results/tables/scores.csv", caption="../report/scores.rst", category="Tables"),
        "results/tables/claims.csv",
        "results/tables/curves.csv",
        "results/tables/toy_bias.csv",
    params:
        cells=" ".join(CELLS),
        scale=config.get("scale", "toy"),
    log:
        "results/logs/aggregate.log",
    benchmark:
        "results/benchmarks/aggregate.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl aggregate \
            --cells {params.cells} \
            --out results/tables \
            --scale {params.scale} \
            --mlflow-runs {input.runs} \
            > {log} 2>&1
        """
