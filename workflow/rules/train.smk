# One job per cell: RL training from the base model; the cell's folder holds metrics.jsonl,
# status.json (completed or diverged), config.yaml and final/ (the trained model). A job with
# several GPUs runs one process per GPU under torchrun (FSDP data parallelism).


rule train:
    input:
        base=lambda wildcards: base_model_input(CELLS[wildcards.cell].model),
        data=lambda wildcards: data_inputs([CELLS[wildcards.cell].task]),
        runs=ancient(RUNS),
    output:
        "results/cells/{cell}/train/status.json",
    params:
        settings=lambda wildcards: train_settings(wildcards.cell),
        launcher=lambda wildcards: train_launcher(job_resources(config, CELLS[wildcards.cell].model)["gpus"]),
    threads: lambda wildcards: job_resources(config, CELLS[wildcards.cell].model)["threads"]
    resources:
        mem_mb=lambda wildcards: job_resources(config, CELLS[wildcards.cell].model)["mem_mb"],
        runtime=lambda wildcards: job_resources(config, CELLS[wildcards.cell].model)["runtime"],
        gpu=lambda wildcards: job_resources(config, CELLS[wildcards.cell].model)["gpus"],
    log:
        "results/logs/train/{cell}.log",
    benchmark:
        "results/benchmarks/train/{cell}.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        {params.launcher} train \
            --out results/cells/{wildcards.cell}/train \
            --mlflow-runs {input.runs} \
            --mlflow-key {wildcards.cell} \
            {params.settings} \
            > {log} 2>&1
        """
