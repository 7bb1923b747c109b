# Every task any cell trains or evaluates on, written once as JSONL + manifest.json.


rule prepare_data:
    output:
        str(LAYOUT.manifest("{task}")),
    params:
        folder=lambda wildcards: LAYOUT.data(wildcards.task),
        options=lambda wildcards: data_options(wildcards.task),
    log:
        str(LAYOUT.log("prepare_data", "{task}")),
    benchmark:
        str(LAYOUT.benchmark("prepare_data", "{task}"))
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl prepare-data \
            --task {wildcards.task} \
            --out {params.folder} \
            {params.options} \
            > {log} 2>&1
        """
