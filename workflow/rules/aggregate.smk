# Tables from the files under results/ (never from MLflow), logged to the grid's parent run.


rule aggregate:
    input:
        cells=expand("results/cells/{cell}/eval/results.json", cell=CELLS),
        bases=expand("results/base/{model}/eval/results.json", model=BASE_TASKS),
        runs=ancient(RUNS),
    output:
        report(
            "results/tables/scores.csv",
            caption="../report/scores.rst",
            category="Tables",
        ),
    params:
        cells=" ".join(CELLS),
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
            --mlflow-runs {input.runs} \
            > {log} 2>&1
        """
