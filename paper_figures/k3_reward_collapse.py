"""K3 in the reward: held-out in-domain pass@1 and training accuracy against step (seed mean),
on-policy, across β, beside K1 in the reward. The paper reports collapse at every β. Cells: every
on-policy k3-reward and k1-reward cell."""

from style import arguments, beta_label, plot_curves, plt, read, save

args = arguments(__doc__)
curves = read(args.tables, "curves")
betas = sorted(set(curves.loc[curves["kl"].isin(["k3-reward", "k1-reward"]), "beta"]))
selection = [(kl, b, "on") for kl in ("k3-reward", "k1-reward") for b in betas]
figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
plot_curves(axes[0], curves, "eval_pass@1", selection, beta_label)
axes[0].set_ylabel("in-domain pass@1 (held out)")
plot_curves(axes[1], curves, "train_accuracy", selection, beta_label)
axes[1].set_ylabel("training accuracy")
axes[0].legend(fontsize=7)
figure.suptitle("K3 in reward (on-policy)")
save(figure, args.out, "k3_reward_collapse")
