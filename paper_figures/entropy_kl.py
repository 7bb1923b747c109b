"""Token entropy of the policy and the exact sequence-level forward KL(πref‖πθ) and reverse
KL(πθ‖πref) against step (seed mean), on-policy, per configuration at its largest β.
Cells: every on-policy cell at the largest β of its configuration, and none."""

from style import arguments, curve_figure, read

args = arguments(__doc__)
curves = read(args.tables, "curves")
on = curves[curves["policy"] == "on"]
selection = sorted({(kl, on.loc[on["kl"] == kl, "beta"].max(), "on") for kl in set(on["kl"])})
panels = [("entropy", "token entropy"), ("forward_kl", "forward KL (sequence)"), ("reverse_kl", "reverse KL (sequence)")]
curve_figure(curves, selection, panels, "entropy and KL to the base (on-policy)", args.out, "entropy_kl")
