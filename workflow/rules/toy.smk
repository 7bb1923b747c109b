# The exact gradient bias and Monte Carlo variance of every configuration on a tabular policy.


rule toy_bias:
    output:
        report(
            "results/toy/bias.csv",
            caption="../report/toy_bias.rst",
            category="Toy study",
        ),
    log:
        "results/logs/toy_bias.log",
    benchmark:
        "results/benchmarks/toy_bias.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl toy-bias \
            --out {output} \
            > {log} 2>&1
        """
