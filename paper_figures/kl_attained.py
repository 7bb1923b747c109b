"""The KL each configuration really attains: the exact sequence-level reverse KL(π‖πref) of the
final policy on held-out in-domain prompts (tables/mechanism.csv, klrl.evaluation.mechanism)
against β, one line per KL configuration, on-policy, with no KL as a horizontal reference; and
the stated objective J_β = reward − β·KL(π‖πref) of each, beside the no-KL policy's J_β at
every β. The claim: most penalties do not optimise what they state, so at a given β they end at
a KL, and a J_β, other than K1 in the reward's (the unbiased gradient of J_β). Cells: every
on-policy cell whose evaluation measured its KL; a configuration of the grid with none says why
in its legend entry."""

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator, SymmetricalLogLocator

from helpers.style import arguments, color, plt, read, save, title

args = arguments(__doc__)
table = read(args.tables, "mechanism")
on = table[table["policy"] == "on"]
none = on[on["kl"] == "none"]
cells = read(args.tables, "scores").drop_duplicates("cell")
cells = cells[cells["policy"] == "on"]
configs = [kl for kl in dict.fromkeys(cells["kl"]) if kl != "none"]
betas = sorted(set(on.loc[on["kl"] != "none", "beta"]))
figure, axes = plt.subplots(1, 2, figsize=(9.6, 4.4), layout="constrained")
for ax, metric, ylabel in (
    (axes[0], "kl_reverse", "KL(π‖πref), sequence"),
    (axes[1], "objective", "J_β = reward − β·KL(π‖πref)"),
):
    for kl in configs:
        rows = on[on["kl"] == kl]
        means = rows.groupby("beta")[metric].mean()
        ax.plot(rows["beta"], rows[metric], linestyle="none", marker="o", markersize=3.5, alpha=0.45, color=color(kl))
        ax.plot(means.index, means.to_numpy(), marker="o", markersize=5, linewidth=1.8, color=color(kl))
    if len(none) and betas:
        if metric == "kl_reverse":  # the no-KL policy's KL is the same whatever β
            ax.axhline(none[metric].mean(), color=color("none"), linewidth=1.4, linestyle=(0, (5, 2)))
        elif len(betas) == 1:  # the no-KL policy scored by the one β's objective
            value = none["reward"].mean() - betas[0] * none["kl_reverse"].mean()
            ax.axhline(value, color=color("none"), linewidth=1.4, linestyle=(0, (5, 2)))
        else:  # the no-KL policy scored by each β's objective
            grid = np.geomspace(min(betas), max(betas), 50) if min(betas) > 0 else np.linspace(0, max(betas), 50)
            value = none["reward"].mean() - grid * none["kl_reverse"].mean()
            ax.plot(grid, value, color=color("none"), linewidth=1.4, linestyle=(0, (5, 2)))
    if betas and min(betas) > 0 and max(betas) > min(betas):
        ax.set_xscale("log")
    if betas:  # ticks at the grid's β, plainly written
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(betas, [f"{beta:g}" for beta in betas])
    if metric == "kl_reverse" and len(on) and (on[metric] > 0).all():
        ax.set_yscale("log")  # a diverging configuration's KL is tens of nats, the others' about one
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))  # labels within a decade too
    elif metric == "objective":
        ax.set_yscale("symlog", linthresh=1.0)  # linear within ±1, logarithmic beyond
        ax.yaxis.set_major_locator(SymmetricalLogLocator(linthresh=1.0, base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
    ax.set_xlabel("β")
    ax.set_ylabel(ylabel)
    if table.empty:
        ax.text(0.5, 0.5, "no cell measured", transform=ax.transAxes, ha="center", va="center", color="gray")


def label(kl: str) -> str:
    """The configuration's name, and why it has no line where it has none."""
    if (on["kl"] == kl).any():
        return kl
    diverged = cells.loc[cells["kl"] == kl, "status"].eq("diverged").all()
    return f"{kl} ({'all seeds diverged' if diverged else 'not measured'})"


handles = [Line2D([], [], color=color(kl), marker="o", linewidth=1.8, label=label(kl)) for kl in configs]
if (cells["kl"] == "none").any():
    reference = label("none").replace("none", "none (no KL)", 1)
    handles.append(Line2D([], [], color=color("none"), linewidth=1.4, linestyle=(0, (5, 2)), label=reference))
figure.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)), fontsize=8)
title(
    figure,
    "most KL penalties do not optimise what they state: at one β they end at another KL, and a lower J_β, than K1 in the reward",
    "on-policy; line: seed mean; points: each seed; dashed: no KL (right: its policy scored at each β)",
    width=int(13 * figure.get_figwidth()),
)
save(figure, args.out, "kl_attained")
