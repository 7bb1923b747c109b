"""Off-policy (a stale actor lagging k steps, truncated importance sampling): held-out in-domain
pass@1 and training accuracy against step (seed mean) per KL configuration, with no KL.
Cells: every off-policy cell."""

from style import PASS_AT_1, TRAIN_ACCURACY, arguments, curve_figure, read

args = arguments(__doc__)
curves = read(args.tables, "curves")
off = curves[curves["policy"] == "off"]
selection = sorted({(kl, beta, "off") for kl, beta in zip(off["kl"], off["beta"])})
curve_figure(curves, selection, [PASS_AT_1, TRAIN_ACCURACY], "off-policy training", args.out, "off_policy_curves")
