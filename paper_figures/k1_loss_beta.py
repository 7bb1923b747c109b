"""K1 in the loss across β: held-out in-domain pass@1 against training step, on-policy, beside no KL
and K1 in the reward. Its gradient is zero in expectation, so the paper's claim is that it behaves
like no KL with noise that grows with β. Cells: every on-policy k1-loss, k1-reward and none cell."""

from helpers.style import PASS_AT_1, arguments, curve_figure, read_curves

args = arguments(__doc__)
curves = read_curves(args.tables)
betas = sorted(set(curves.loc[curves["kl"].isin(["k1-loss", "k1-reward"]), "beta"]))
selection = [("none", 0.0, "on")] + [(kl, b, "on") for kl in ("k1-loss", "k1-reward") for b in betas]
curve_figure(
    curves,
    selection,
    [PASS_AT_1],
    "K1 in the loss only adds noise: no better than no KL, and unstable as β grows",
    args.out,
    "k1_loss_beta",
)
