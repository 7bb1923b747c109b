"""K3 in the reward across β beside K1 in the reward: held-out in-domain pass@1 and training accuracy
against training step, on-policy. The paper's claim: K3 in the reward collapses training at every β,
K1 in the reward does not. Cells: every on-policy k3-reward and k1-reward cell."""

from helpers.style import PASS_AT_1, TRAIN_ACCURACY, arguments, curve_figure, read_curves

args = arguments(__doc__)
curves = read_curves(args.tables)
betas = sorted(set(curves.loc[curves["kl"].isin(["k3-reward", "k1-reward"]), "beta"]))
selection = [(kl, b, "on") for kl in ("k3-reward", "k1-reward") for b in betas]
curve_figure(
    curves,
    selection,
    [PASS_AT_1, TRAIN_ACCURACY],
    "K3 in the reward collapses training at every β; K1 in the reward does not",
    args.out,
    "k3_reward_collapse",
)
