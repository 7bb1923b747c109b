# Every task any cell trains or evaluates on, written once as JSONL + manifest.json.


rule prepare_data:
    output:
        "results/data/{task}/manifest.json",
    params:
        options=lambda wildcards: data_options(wildcards.task),
    log:
        "results/logs/prepare_data/{task}.log",
    benchmark:
        "results/benchmarks/prepare_data/{task}.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl prepare-data \
            --task {wildcards.task} \
            --out results/data/{wildcards.task} \
            {params.options} \
            > {log} 2>&1
        """
