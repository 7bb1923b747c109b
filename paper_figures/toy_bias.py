"""Toy study: relative gradient bias and relative Monte Carlo spread of each KL configuration,
on- and off-policy, on the tabular policy (results/tables/toy_bias.csv; exact, every sequence
enumerated). Scale: toy (V=3, T=4)."""

import numpy as np
from style import COLORS, arguments, plt, read, save

args = arguments(__doc__)
toy = read(args.tables, "toy_bias")
configs = list(dict.fromkeys(toy["config"]))
figure, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=False)
x = np.arange(len(configs))
for ax, column, title in ((axes[0], "rel_bias", "relative bias ‖E[ĝ] − ∇KL‖ / ‖∇KL‖"), (axes[1], "rel_std", "relative std of a batch estimate")):
    for offset, mode, hatch in ((-0.2, "on", ""), (0.2, "off", "//")):
        values = toy[toy["mode"] == mode].set_index("config").reindex(configs)[column]
        ax.bar(x + offset, values.fillna(0), width=0.4, color=[COLORS.get(c, "k") for c in configs], hatch=hatch,
               edgecolor="black", linewidth=0.3, label=f"{mode}-policy")
        for i in np.flatnonzero(values.isna().to_numpy()):
            ax.text(x[i] + offset, 0, "missing", rotation=90, fontsize=7, ha="center", va="bottom")
    ax.set_xticks(x, configs, rotation=60, ha="right")
    ax.set_title(title)
    ax.set_yscale("symlog", linthresh=1e-3)
axes[0].legend()
save(figure, args.out, "toy_bias")
