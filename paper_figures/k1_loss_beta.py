"""K1 in the loss across β: held-out in-domain pass@1 against training step (seed mean), on-policy,
beside no KL and K1 in the reward. Its gradient is zero in expectation, so it should behave like
no KL with extra noise growing with β. Cells: every on-policy k1-loss, k1-reward and none cell."""

from style import arguments, beta_label, plot_curves, plt, read, save

args = arguments(__doc__)
curves = read(args.tables, "curves")
betas = sorted(set(curves.loc[curves["kl"] == "k1-loss", "beta"]) | set(curves.loc[curves["kl"] == "k1-reward", "beta"]))
selection = [("none", 0.0, "on")] + [(kl, b, "on") for kl in ("k1-loss", "k1-reward") for b in betas]
figure, ax = plt.subplots(figsize=(6, 3.8))
plot_curves(ax, curves, "eval_pass@1", selection, beta_label)
ax.set_ylabel("in-domain pass@1")
ax.set_title("K1 in loss across β (on-policy)")
ax.legend(fontsize=7)
save(figure, args.out, "k1_loss_beta")
