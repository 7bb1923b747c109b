# Tables from the files under {OUT}/ (never from MLflow), logged to the grid's parent run.


localrules:
    aggregate,


rule aggregate:
    input:
        cells=expand(f"{OUT}/cells/{{cell}}/eval/results.json", cell=CELLS),
        bases=expand(f"{OUT}/base/{{model}}/eval/results.json", model=BASE_TASKS),
        toy=f"{OUT}/toy/bias.csv",
        runs=ancient(RUNS),
    output:
        report(f"{OUT}/tables/main.csv", caption="../report/main.rst", category="Tables"),
        report(f"{OUT}/tables/table1.csv", caption="../report/table1.rst", category="Tables"),
        report(f"{OUT}/tables/paper_comparison.csv", caption="../report/paper_comparison.rst", category="Tables"),
        report(f"{OUT}/tables/table2.csv", caption="../report/table2.rst", category="Tables"),
        report(f"{OUT}/tables/scores.csv", caption="../report/scores.rst", category="Tables"),
        f"{OUT}/tables/claims.csv",
        f"{OUT}/tables/curves.csv",
        f"{OUT}/tables/toy_bias.csv",
    params:
        root=lambda wildcards: OUT,  # results/<experiment>
        cells=" ".join(CELLS),
        scale=config.get("scale", "toy"),
    log:
        f"{OUT}/logs/aggregate.log",
    benchmark:
        f"{OUT}/benchmarks/aggregate.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl aggregate \
            --cells {params.cells} \
            --root {params.root} \
            --out {params.root}/tables \
            --scale {params.scale} \
            --mlflow-runs {input.runs} \
            > {log} 2>&1
        """
