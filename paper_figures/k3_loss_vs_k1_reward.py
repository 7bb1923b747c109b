"""K3 in the loss (GRPO's default) against K1 in the reward: held-out in-domain pass@1 against step
(seed mean), on-policy, each β. Cells: every on-policy k3-loss and k1-reward cell."""

from style import PASS_AT_1, arguments, curve_figure, read

args = arguments(__doc__)
curves = read(args.tables, "curves")
betas = sorted(set(curves.loc[curves["kl"].isin(["k3-loss", "k1-reward"]), "beta"]))
selection = [(kl, b, "on") for kl in ("k3-loss", "k1-reward") for b in betas]
curve_figure(curves, selection, [PASS_AT_1], "K3 in loss vs K1 in reward (on-policy)", args.out, "k3_loss_vs_k1_reward")
