"""K3 in the loss (GRPO's default) against K1 in the reward: held-out in-domain pass@1 against step
(seed mean), on-policy, each β. Cells: every on-policy k3-loss and k1-reward cell."""

from style import arguments, beta_label, plot_curves, plt, read, save

args = arguments(__doc__)
curves = read(args.tables, "curves")
betas = sorted(set(curves.loc[curves["kl"].isin(["k3-loss", "k1-reward"]), "beta"]))
selection = [(kl, b, "on") for kl in ("k3-loss", "k1-reward") for b in betas]
figure, ax = plt.subplots(figsize=(6, 3.8))
plot_curves(ax, curves, "eval_pass@1", selection, beta_label)
ax.set_ylabel("in-domain pass@1")
ax.set_title("K3 in loss vs K1 in reward (on-policy)")
ax.legend(fontsize=7)
save(figure, args.out, "k3_loss_vs_k1_reward")
