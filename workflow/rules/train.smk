# One job per cell: RL training from the base model; the cell's folder holds metrics.jsonl,
# status.json (completed or diverged), config.yaml and final/ (the trained model). A job with
# several processes (one per GPU by default) runs them under torchrun (FSDP data parallelism).
# The cell's settings reach the job as a JSON file written by a serializer (klrl.grid.expansion.settings_json):
# a changed setting rewrites it, and the cell trains again.


localrules:
    cell_settings,
    plan,


# The analysis plan (klrl.analysis.preregistration), hashed, before the first cell trains: every train job needs it
# (ancient: a new plan is recorded, never a reason to train again). A changed plan changes the
# hash in params, so the rule runs again and appends the new plan to plans.jsonl.
rule plan:
    output:
        str(LAYOUT.plan()),
    params:
        config=lambda wildcards: json.dumps(config),
        hash=plan_hash(plan_of(grid_cells(config))),
    log:
        str(LAYOUT.log("plan")),
    conda:
        "../../envs/klrl.yaml"
    shell:
        "python -m klrl plan --config-json {params.config:q} > {log} 2>&1"


rule cell_settings:
    output:
        str(LAYOUT.settings("{cell}")),
    params:
        settings=lambda wildcards: settings_json(CELLS[wildcards.cell]),
    log:
        str(LAYOUT.log("cell_settings", "{cell}")),
    conda:
        "../../envs/klrl.yaml"
    shell:
        "printf '%s\\n' {params.settings:q} > {output} 2> {log}"


rule train:
    input:
        base=lambda wildcards: base_model_input(CELLS[wildcards.cell].model),
        data=lambda wildcards: data_inputs([CELLS[wildcards.cell].task]),
        runs=ancient(RUNS),
        settings=str(LAYOUT.settings("{cell}")),
        plan=ancient(str(LAYOUT.plan())),
    output:
        str(LAYOUT.status("{cell}")),
    params:
        folder=lambda wildcards: LAYOUT.train(wildcards.cell),
        lease=lambda wildcards: lease_prefix(job_resources(config, CELLS[wildcards.cell].model)["gpus"]),
        launcher=lambda wildcards: train_launcher(job_resources(config, CELLS[wildcards.cell].model)["processes"]),
    threads: lambda wildcards: job_resources(config, CELLS[wildcards.cell].model)["threads"]
    resources:
        mem_mb=lambda wildcards: job_resources(config, CELLS[wildcards.cell].model)["mem_mb"],
        runtime=lambda wildcards: job_resources(config, CELLS[wildcards.cell].model)["runtime"],
        gpu=lambda wildcards: job_resources(config, CELLS[wildcards.cell].model)["gpus"],
    log:
        str(LAYOUT.log("train", "{cell}")),
    benchmark:
        str(LAYOUT.benchmark("train", "{cell}"))
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        {params.lease} {params.launcher} train \
            --out {params.folder} \
            --mlflow-runs {input.runs} \
            --mlflow-key {wildcards.cell} \
            --config {input.settings} \
            > {log} 2>&1
        """
