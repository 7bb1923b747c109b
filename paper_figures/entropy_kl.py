"""Token entropy, the exact sequence-level reverse KL(πθ‖πref) and the per-token forward
KL(πref‖πθ) summed over prefixes sampled from πθ (not the sequence-level forward KL, which would
need prefixes from πref) against training step, on-policy, for the four gradients the placements give: none (no KL),
K1 in the reward (the sequence-level reverse-KL gradient), K3 in the loss (a token-level forward-KL
gradient) and K1 in the loss (zero in expectation), each at its largest β. The claim: each
placement restrains the divergence its gradient targets. Cells: the on-policy none, k1-reward,
k3-loss and k1-loss cells at the largest β of each."""

from helpers.style import arguments, curve_figure, read_curves

CONFIGS = ("none", "k1-reward", "k3-loss", "k1-loss")
args = arguments(__doc__)
curves = read_curves(args.tables)
on = curves[(curves["policy"] == "on") & curves["kl"].isin(CONFIGS)]
selection = [(kl, on.loc[on["kl"] == kl, "beta"].max(), "on") for kl in CONFIGS if (on["kl"] == kl).any()]
panels = [
    ("entropy", "token entropy"),
    ("forward_kl_policy_prefixes", "Σ_t forward KL at πθ's prefixes"),
    ("reverse_kl", "reverse KL(πθ‖πref), sequence"),
]
curve_figure(
    curves,
    selection,
    panels,
    "Each placement restrains the divergence its gradient targets: K1 in the reward the reverse KL, K3 in the loss the forward KL",
    args.out,
    "entropy_kl",
)
