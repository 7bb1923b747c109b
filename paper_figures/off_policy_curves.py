"""Off-policy training (a stale actor lagging k steps, truncated importance sampling): held-out
in-domain pass@1 and training accuracy against training step for each KL configuration and no KL.
The paper's claim: without KL, or with K1 in the loss, training collapses; K1 in the reward and K3
in the loss stay stable. Cells: every off-policy cell."""

from style import PASS_AT_1, TRAIN_ACCURACY, arguments, curve_figure, read_curves

args = arguments(__doc__)
curves = read_curves(args.tables)
off = curves[curves["policy"] == "off"]
selection = sorted({(kl, beta, "off") for kl, beta in zip(off["kl"], off["beta"])})
curve_figure(curves, selection, [PASS_AT_1, TRAIN_ACCURACY],
             "Off-policy, no KL or K1 in the loss collapses; K1 in the reward and K3 in the loss stay stable",
             args.out, "off_policy_curves")
