# Evaluation through lm-evaluation-harness: each cell's final model on its evaluation tasks,
# and each base model once on every task its cells are evaluated on. Both run one command
# (EVALUATE); a cell's job also hands over its training status, so that a diverged cell is
# recorded as such, not evaluated, and its base model, β, training task and decoding, so that
# the KL its final model attains is measured (klrl.evaluation.mechanism; not of a base model).

EVALUATE = """
{params.lease} python -m klrl evaluate \
    --model {params.model} \
    {params.model_options} \
    {params.train_status} \
    {params.mechanism} \
    --tasks {params.tasks} \
    --data-dir {params.data} \
    --out {output} \
    --device {params.device} \
    --threads {threads} \
    {params.options} \
    --mlflow-runs {input.runs} \
    --mlflow-key {params.key} \
    > {log} 2>&1
"""


rule evaluate:
    input:
        status=str(LAYOUT.status("{cell}")),
        base=lambda wildcards: base_model_input(CELLS[wildcards.cell].model),
        data=lambda wildcards: data_inputs(
            dict.fromkeys([*CELLS[wildcards.cell].eval_tasks, CELLS[wildcards.cell].task])
        ),
        runs=ancient(RUNS),
    output:
        str(LAYOUT.cell_eval("{cell}")),
    params:
        model=lambda wildcards: LAYOUT.final(wildcards.cell),
        data=LAYOUT.root / "data",
        tasks=lambda wildcards: " ".join(CELLS[wildcards.cell].eval_tasks),
        options=evaluation_options(),
        model_options=lambda wildcards: model_options(CELLS[wildcards.cell].model, revision=False),
        device=lambda wildcards: device(CELLS[wildcards.cell].model),
        train_status=lambda wildcards, input: f"--train-status {input.status}",
        mechanism=lambda wildcards: mechanism_options(CELLS[wildcards.cell]),
        key=lambda wildcards: wildcards.cell,
        lease=lambda wildcards: lease_prefix(eval_job_resources(config, CELLS[wildcards.cell].model)["gpus"]),
    threads: lambda wildcards: eval_job_resources(config, CELLS[wildcards.cell].model)["threads"]
    resources:
        mem_mb=lambda wildcards: eval_job_resources(config, CELLS[wildcards.cell].model)["mem_mb"],
        runtime=lambda wildcards: eval_job_resources(config, CELLS[wildcards.cell].model)["runtime"],
        gpu=lambda wildcards: eval_job_resources(config, CELLS[wildcards.cell].model)["gpus"],
    log:
        str(LAYOUT.log("evaluate", "{cell}")),
    benchmark:
        str(LAYOUT.benchmark("evaluate", "{cell}"))
    conda:
        "../../envs/klrl.yaml"
    shell:
        EVALUATE


rule evaluate_base:
    input:
        base=lambda wildcards: base_model_input(wildcards.model),
        data=lambda wildcards: data_inputs(BASE_TASKS[wildcards.model]),
        runs=ancient(RUNS),
    output:
        str(LAYOUT.base_eval("{model}")),
    params:
        data=LAYOUT.root / "data",
        model=lambda wildcards: model_path(wildcards.model, config),
        model_options=lambda wildcards: model_options(wildcards.model),
        tasks=lambda wildcards: " ".join(BASE_TASKS[wildcards.model]),
        options=evaluation_options(),
        device=lambda wildcards: device(wildcards.model),
        train_status="",
        mechanism="",
        key=lambda wildcards: f"base/{wildcards.model}",
        lease=lambda wildcards: lease_prefix(eval_job_resources(config, wildcards.model)["gpus"]),
    threads: lambda wildcards: eval_job_resources(config, wildcards.model)["threads"]
    resources:
        mem_mb=lambda wildcards: eval_job_resources(config, wildcards.model)["mem_mb"],
        runtime=lambda wildcards: eval_job_resources(config, wildcards.model)["runtime"],
        gpu=lambda wildcards: eval_job_resources(config, wildcards.model)["gpus"],
    log:
        str(LAYOUT.log("evaluate_base", "{model}")),
    benchmark:
        str(LAYOUT.benchmark("evaluate_base", "{model}"))
    conda:
        "../../envs/klrl.yaml"
    shell:
        EVALUATE
