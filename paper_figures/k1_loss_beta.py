"""K1 in the loss across β: held-out in-domain pass@1 against training step (seed mean), on-policy,
beside no KL and K1 in the reward. Its gradient is zero in expectation, so it should behave like
no KL with extra noise growing with β. Cells: every on-policy k1-loss, k1-reward and none cell."""

from style import PASS_AT_1, arguments, curve_figure, read

args = arguments(__doc__)
curves = read(args.tables, "curves")
betas = sorted(set(curves.loc[curves["kl"].isin(["k1-loss", "k1-reward"]), "beta"]))
selection = [("none", 0.0, "on")] + [(kl, b, "on") for kl in ("k1-loss", "k1-reward") for b in betas]
curve_figure(curves, selection, [PASS_AT_1], "K1 in loss across β (on-policy)", args.out, "k1_loss_beta")
