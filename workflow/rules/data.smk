# Every task any cell trains or evaluates on, written once as JSONL + manifest.json.


rule prepare_data:
    output:
        f"{OUT}/data/{{task}}/manifest.json",
    params:
        root=lambda wildcards: OUT,  # results/<experiment>
        options=lambda wildcards: data_options(wildcards.task),
    log:
        f"{OUT}/logs/prepare_data/{{task}}.log",
    benchmark:
        f"{OUT}/benchmarks/prepare_data/{{task}}.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl prepare-data \
            --task {wildcards.task} \
            --out {params.root}/data/{wildcards.task} \
            {params.options} \
            > {log} 2>&1
        """
