"""K3 in the loss (GRPO's default, a biased token-level forward-KL gradient) against K1 in the reward
(unbiased): held-out in-domain pass@1 against training step, on-policy, at each β. The paper's
claim: both are stable, K1 in the reward ahead. Cells: every on-policy k3-loss and k1-reward cell."""

from helpers.style import PASS_AT_1, arguments, curve_figure, read_curves

args = arguments(__doc__)
curves = read_curves(args.tables)
betas = sorted(set(curves.loc[curves["kl"].isin(["k3-loss", "k1-reward"]), "beta"]))
selection = [(kl, b, "on") for kl in ("k3-loss", "k1-reward") for b in betas]
curve_figure(
    curves,
    selection,
    [PASS_AT_1],
    "K3 in the loss (GRPO's default) is stable but trails K1 in the reward",
    args.out,
    "k3_loss_vs_k1_reward",
)
