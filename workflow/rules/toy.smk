# The exact gradient bias and Monte Carlo variance of every configuration on a tabular policy,
# with the off-policy curves over lags and the prefix-IS variance over sequence lengths.


rule toy_bias:
    output:
        bias=report(
            f"{OUT}/toy/bias.csv",
            caption="../report/toy_bias.rst",
            category="Toy study",
        ),
        by_lag=f"{OUT}/toy/by_lag.csv",
        by_horizon=f"{OUT}/toy/prefixis_by_horizon.csv",
    params:
        root=lambda wildcards: OUT,  # results/<experiment>
    log:
        f"{OUT}/logs/toy_bias.log",
    benchmark:
        f"{OUT}/benchmarks/toy_bias.tsv"
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl toy-bias \
            --out {output.bias} \
            --curves-out {params.root}/toy \
            > {log} 2>&1
        """
