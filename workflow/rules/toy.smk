# The exact gradient bias and Monte Carlo variance of every configuration on a tabular policy,
# with the off-policy curves over lags and the prefix-IS variance over sequence lengths.


rule toy_bias:
    output:
        bias=report(
            str(LAYOUT.toy("bias.csv")),
            caption="../report/toy_bias.rst",
            category="Toy study",
        ),
        by_lag=str(LAYOUT.toy("by_lag.csv")),
        by_horizon=str(LAYOUT.toy("prefixis_by_horizon.csv")),
    params:
        folder=LAYOUT.toy(),
    log:
        str(LAYOUT.log("toy_bias")),
    benchmark:
        str(LAYOUT.benchmark("toy_bias"))
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl toy-bias \
            --out {output.bias} \
            --curves-out {params.folder} \
            > {log} 2>&1
        """
