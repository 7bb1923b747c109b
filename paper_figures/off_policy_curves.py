"""Off-policy training (a stale actor lagging k steps, truncated importance sampling): held-out
in-domain pass@1 and training accuracy against training step for each KL configuration and no KL.
The paper's claim: without KL, or with K1 in the loss, training collapses; K1 in the reward and K3
in the loss stay stable. Cells: the off-policy cells at the grid's largest lag (the stalest actor,
where the claim says no KL degrades; the title names it), which are all of them when the grid has
one lag."""

from helpers.style import PASS_AT_1, TRAIN_ACCURACY, arguments, curve_figure, read_curves

args = arguments(__doc__)
curves = read_curves(args.tables)
lag = curves.loc[curves["policy"] == "off", "lag"].max()
off = curves[(curves["policy"] == "off") & (curves["lag"] == lag)]
selection = sorted({(kl, beta, "off") for kl, beta in zip(off["kl"], off["beta"])})
stale = "" if off.empty else f" (lag {lag:g})"  # a grid with no off-policy cell: no lag to name
curve_figure(
    curves[(curves["policy"] == "on") | (curves["lag"] == lag)],
    selection,
    [PASS_AT_1, TRAIN_ACCURACY],
    f"Off-policy{stale}, no KL or K1 in the loss collapses; K1 in the reward and K3 in the loss stay stable",
    args.out,
    "off_policy_curves",
)
