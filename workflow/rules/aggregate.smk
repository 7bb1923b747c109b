# Tables from the files under results/<experiment>/ (never from MLflow), logged to the grid's parent run.


localrules:
    aggregate,


rule aggregate:
    input:
        cells=[str(LAYOUT.cell_eval(cell)) for cell in CELLS],
        settings=[str(LAYOUT.settings(cell)) for cell in CELLS],
        bases=[str(LAYOUT.base_eval(model)) for model in BASE_TASKS],
        toy=str(LAYOUT.toy("bias.csv")),
        plan=str(LAYOUT.plan()),
        runs=ancient(RUNS),
    output:
        report(str(LAYOUT.tables("main.csv")), caption="../report/main.rst", category="Tables"),
        report(str(LAYOUT.tables("table1.csv")), caption="../report/table1.rst", category="Tables"),
        report(str(LAYOUT.tables("paper_comparison.csv")), caption="../report/paper_comparison.rst", category="Tables"),
        report(str(LAYOUT.tables("table2.csv")), caption="../report/table2.rst", category="Tables"),
        report(str(LAYOUT.tables("scores.csv")), caption="../report/scores.rst", category="Tables"),
        str(LAYOUT.tables("claims.csv")),
        str(LAYOUT.tables("curves.csv")),
        str(LAYOUT.tables("mechanism.csv")),
        str(LAYOUT.tables("toy_bias.csv")),
    params:
        root=LAYOUT.root,
        tables=LAYOUT.tables(),
        cells=" ".join(CELLS),
        scale=config.get("scale", "toy"),
    log:
        str(LAYOUT.log("aggregate")),
    benchmark:
        str(LAYOUT.benchmark("aggregate"))
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl aggregate \
            --cells {params.cells} \
            --root {params.root} \
            --out {params.tables} \
            --scale {params.scale} \
            --mlflow-runs {input.runs} \
            > {log} 2>&1
        """
