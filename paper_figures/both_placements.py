"""The "both" placements (the same estimate in the reward and the loss, unbiased for K1 and K3)
beside K1 in the reward and K3 in the loss: final pass@1 on every evaluation set, the mean over
seeds and problems with a bootstrap 95% interval, beside the base model (dashed). The paper's claim:
K3 in both matches K1 in the reward. Cells: the on-policy k1-both, k3-both, k1-reward and k3-loss
cells at the β of the "both" cells."""

from helpers.bars import bars
from helpers.style import arguments, read

args = arguments(__doc__)
main = read(args.tables, "main")
betas = set(main.loc[main["kl"].isin(["k1-both", "k3-both"]), "beta"])
chosen = main[
    (main["policy"] == "on")
    & main["kl"].isin(["k1-both", "k3-both", "k1-reward", "k3-loss"])
    & main["beta"].isin(betas)
]
bars(
    chosen,
    args.out,
    "both_placements",
    "Putting the estimate in both reward and loss makes K3 unbiased: K3 in both matches K1 in the reward",
    main["beta"],
)
