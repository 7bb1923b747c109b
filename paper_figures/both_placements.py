"""The "both" placements (the same estimate in reward and loss, unbiased for K1 and K3) beside K1 in
the reward and K3 in the loss: final pass@1 per evaluation set, seed mean with bootstrap 95%
intervals; base model dashed. Cells: the on-policy k1-both, k3-both, k1-reward and k3-loss cells."""

from bars import bars
from style import arguments, read

args = arguments(__doc__)
main = read(args.tables, "main")
betas = set(main.loc[main["kl"].isin(["k1-both", "k3-both"]), "beta"])
chosen = main[(main["policy"] == "on") & main["kl"].isin(["k1-both", "k3-both", "k1-reward", "k3-loss"]) & main["beta"].isin(betas)]
bars(chosen, args.out, "both_placements", "KL in both reward and loss")
