"""The exact relative gradient bias ‖E[ĝ] − ∇KL‖ / ‖∇KL‖ and the relative standard deviation of a
batch estimate for each KL configuration, on- and off-policy, on the tabular policy (3 symbols,
4 steps) where every sequence is enumerated (results/tables/toy_bias.csv). Linear axes: a bias of exactly 0 is marked
"0". The claim: on-policy only K1 in the reward and the "both" placements are unbiased; off-policy
only sequence- or prefix-level importance sampling stays unbiased. Cells: none (the toy study, always
at toy scale)."""

import numpy as np
from matplotlib.patches import Patch
from helpers.style import arguments, color, plt, read, save, title

ZERO = 1e-9  # relative bias below this is exactly 0 up to floating point
args = arguments(__doc__)
toy = read(args.tables, "toy_bias")
configs = list(dict.fromkeys(toy["config"]))
figure, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
x = np.arange(len(configs))
panels = (
    (axes[0], "rel_bias", "relative gradient bias ‖E[ĝ] − ∇KL‖ / ‖∇KL‖"),
    (axes[1], "rel_std", "relative std of a batch estimate"),
)
for ax, column, ylabel in panels:
    for offset, mode, hatch in ((-0.2, "on", ""), (0.2, "off", "///")):
        values = toy[toy["mode"] == mode].set_index("config").reindex(configs)[column]
        ax.bar(
            x + offset,
            values.fillna(0),
            width=0.4,
            color=[color(c) for c in configs],
            hatch=hatch,
            edgecolor="white",
            linewidth=0.5,
        )
        for i, value in enumerate(values):
            if np.isnan(value):
                ax.text(x[i] + offset, 0.02, "missing", rotation=90, fontsize=7, ha="center", va="bottom")
            elif column == "rel_bias" and abs(value) < ZERO:
                ax.plot(x[i] + offset, 0, marker="D", markersize=4, color="black", clip_on=False, zorder=3)
                ax.annotate(
                    "0",
                    (x[i] + offset, 0),
                    xytext=(0, 4),
                    textcoords="offset points",
                    fontsize=7.5,
                    ha="center",
                    va="bottom",
                    fontweight="bold",
                )
    ax.set_xticks(x, configs, rotation=50, ha="right", rotation_mode="anchor")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, None)
    ax.axhline(0, color="black", linewidth=0.8)
axes[0].axhline(1, color="gray", linewidth=0.8, linestyle="dotted")
handles = [
    Patch(facecolor="gray", edgecolor="white", label="on-policy (samples from πθ)"),
    Patch(facecolor="gray", edgecolor="white", hatch="///", label="off-policy (samples from a stale μ)"),
]
handles.append(plt.Line2D([], [], marker="D", markersize=4, color="black", linestyle="none", label="bias exactly 0"))
figure.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8)
title(
    figure,
    'Exact gradient bias: on-policy only K1 in the reward and the "both" placements are unbiased; '
    "off-policy only sequence- or prefix-level importance sampling stays unbiased",
    "dotted line: bias 1, as large as the true gradient (no KL)",
    width=150,
)
save(figure, args.out, "toy_bias")
