"""Off-policy (a stale actor lagging k steps, truncated importance sampling): held-out in-domain
pass@1 and training accuracy against step (seed mean) per KL configuration, with no KL.
Cells: every off-policy cell."""

from style import arguments, beta_label, plot_curves, plt, read, save

args = arguments(__doc__)
curves = read(args.tables, "curves")
off = curves[curves["policy"] == "off"]
selection = sorted({(kl, beta, "off") for kl, beta in zip(off["kl"], off["beta"])})
figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
plot_curves(axes[0], curves, "eval_pass@1", selection, beta_label)
axes[0].set_ylabel("in-domain pass@1 (held out)")
plot_curves(axes[1], curves, "train_accuracy", selection, beta_label)
axes[1].set_ylabel("training accuracy")
axes[0].legend(fontsize=7)
figure.suptitle("off-policy training")
save(figure, args.out, "off_policy_curves")
