"""Token entropy of the policy and the exact sequence-level forward KL(πref‖πθ) and reverse
KL(πθ‖πref) against step (seed mean), on-policy, per configuration at its largest β.
Cells: every on-policy cell at the largest β of its configuration, and none."""

from style import arguments, beta_label, plot_curves, plt, read, save

args = arguments(__doc__)
curves = read(args.tables, "curves")
on = curves[curves["policy"] == "on"]
selection = sorted({(kl, on.loc[on["kl"] == kl, "beta"].max(), "on") for kl in set(on["kl"])})
figure, axes = plt.subplots(1, 3, figsize=(14, 3.8))
for ax, metric, title in zip(axes, ("entropy", "forward_kl", "reverse_kl"), ("token entropy", "forward KL (sequence)", "reverse KL (sequence)")):
    plot_curves(ax, curves, metric, selection, beta_label)
    ax.set_title(title)
axes[0].legend(fontsize=7)
save(figure, args.out, "entropy_kl")
