# The exact gradient bias and Monte Carlo variance of every configuration on a tabular policy,
# with the off-policy curves over lags and the prefix-IS variance over sequence lengths.


rule toy_bias:
    output:
        bias=report(
            "results/toy/bias.csv",
            caption="../report/toy_bias.rst",
            category="Toy study",
        ),
        by_lag="results/toy/by_lag.csv",
        by_horizon="results/toy/prefixis_by_horizon.csv",
    log:
        "results/logs/toy_bias.log",
    benchmark:
        "results/benchmarks/toy_bias.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl toy-bias \
            --out {output.bias} \
            --curves-out results/toy \
            > {log} 2>&1
        """
