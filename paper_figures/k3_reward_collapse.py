"""K3 in the reward: held-out in-domain pass@1 and training accuracy against step (seed mean),
on-policy, across β, beside K1 in the reward. The paper reports collapse at every β. Cells: every
on-policy k3-reward and k1-reward cell."""

from style import PASS_AT_1, TRAIN_ACCURACY, arguments, curve_figure, read

args = arguments(__doc__)
curves = read(args.tables, "curves")
betas = sorted(set(curves.loc[curves["kl"].isin(["k3-reward", "k1-reward"]), "beta"]))
selection = [(kl, b, "on") for kl in ("k3-reward", "k1-reward") for b in betas]
curve_figure(curves, selection, [PASS_AT_1, TRAIN_ACCURACY], "K3 in reward (on-policy)", args.out, "k3_reward_collapse")
