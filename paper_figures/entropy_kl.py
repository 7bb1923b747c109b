"""Token entropy of the policy, the exact sequence-level reverse KL(πθ‖πref), and the per-token
forward KL(πref‖πθ) summed over prefixes sampled from πθ (not the sequence-level forward KL,
which would need prefixes from πref) against step (seed mean), on-policy, per configuration at
its largest β.
Cells: every on-policy cell at the largest β of its configuration, and none."""

from style import arguments, curve_figure, read

args = arguments(__doc__)
curves = read(args.tables, "curves")
on = curves[curves["policy"] == "on"]
selection = sorted({(kl, on.loc[on["kl"] == kl, "beta"].max(), "on") for kl in set(on["kl"])})
panels = [("entropy", "token entropy"), ("forward_kl_policy_prefixes", "Σ_t forward KL at πθ's prefixes"), ("reverse_kl", "reverse KL (sequence)")]
curve_figure(curves, selection, panels, "entropy and KL to the base (on-policy)", args.out, "entropy_kl")
