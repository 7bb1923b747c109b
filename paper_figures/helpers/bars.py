"""Grouped bars with intervals, shared by the bar figures: one panel per evaluation set."""

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from helpers.style import color, config_label, plt, save, title

DOMAINS = {"in": "in-domain", "out": "out-of-domain"}
HATCHES = ["", "///", "...", "xx", "\\\\\\", "++"]  # largest β first, as the line styles of the curve figures


def _seeds_note(status: str) -> str:
    """'' when no seed diverged, else e.g. '1/2 seeds diverged' or 'all seeds diverged',
    from main.csv's status summary ('1 completed, 1 diverged')."""
    counts = {name: int(count) for count, name in (part.split() for part in str(status).split(", ") if part)}
    if not counts.get("diverged"):
        return ""
    return (
        "all seeds diverged"
        if counts["diverged"] == sum(counts.values())
        else f"{counts['diverged']}/{sum(counts.values())} seeds diverged"
    )


def bars(rows, out, name: str, claim: str, grid_betas) -> None:
    """rows: main.csv rows; grid_betas: every β of the grid, so that a β has the same hatch in
    every figure (the largest none, then ///, ..., xx). A configuration with no scores is an empty hatched slot labelled
    `missing` or `all seeds diverged`; one where some seeds diverged says how many in its bar."""
    tasks = [task for task in dict.fromkeys(rows["task"]) if isinstance(task, str)] or ["(no results)"]
    configs = list(dict.fromkeys(zip(rows["kl"], rows["beta"])))
    betas = sorted({b for b in grid_betas if b > 0}, reverse=True)
    if len(betas) > len(HATCHES):
        raise ValueError(f"{len(betas)} values of β, but only {len(HATCHES)} hatches")
    hatch = {0.0: ""} | dict(zip(betas, HATCHES))
    betas = sorted({beta for kl, beta in configs if kl != "none"}, reverse=True)
    top = min(1.0, max(0.1, np.nanmax(rows["ci_hi"].to_numpy(dtype=float), initial=0.0)) * 1.1)
    figure, axes = plt.subplots(
        1,
        len(tasks),
        figsize=(max(2.8, 0.32 * len(configs)) * len(tasks) + 2.2, 4.2),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    x = np.arange(len(configs))
    for ax, task in zip(axes[0], tasks):
        for i, (kl, beta) in enumerate(configs):
            config = rows[(rows["kl"] == kl) & (rows["beta"] == beta)]
            row = config[config["task"] == task]
            value = row["pass@1"].iloc[0] if len(row) else np.nan
            note = _seeds_note(config["status"].iloc[0])
            if np.isnan(value):
                ax.bar(x[i], top, color="none", edgecolor="lightgray", hatch="xx", linewidth=0.5)
                ax.text(
                    x[i],
                    top * 0.03,
                    "all seeds diverged" if note == "all seeds diverged" else "missing",
                    rotation=90,
                    fontsize=7,
                    ha="center",
                    va="bottom",
                )
                continue
            err = [[value - row["ci_lo"].iloc[0]], [row["ci_hi"].iloc[0] - value]]
            ax.bar(
                x[i],
                value,
                color=color(kl),
                hatch=hatch[beta],
                edgecolor="white",
                linewidth=0.5,
                yerr=err,
                capsize=2.5,
                error_kw={"linewidth": 1},
            )
            if note:
                ax.text(
                    x[i],
                    top * 0.03,
                    note,
                    rotation=90,
                    fontsize=6.5,
                    ha="center",
                    va="bottom",
                    bbox={"facecolor": "white", "alpha": 0.8, "linewidth": 0, "pad": 1},
                )
            if not np.isnan(row["base_pass@1"].iloc[0]):
                ax.hlines(
                    row["base_pass@1"].iloc[0],
                    x[i] - 0.45,
                    x[i] + 0.45,
                    colors="black",
                    linestyles="dashed",
                    linewidth=1,
                )
        ax.set_xticks(
            x,
            [config_label(kl, beta) for kl, beta in configs],
            rotation=60,
            ha="right",
            rotation_mode="anchor",
            fontsize=7.5,
        )
        ax.set_xlim(-0.6, len(configs) - 0.4)
        domain = rows.loc[rows["task"] == task, "domain"]
        ax.set_title(f"{task} ({DOMAINS.get(domain.iloc[0], '?')})" if len(domain) else task, fontsize=9)
    axes[0][0].set_ylim(0, top)
    axes[0][0].set_ylabel("final pass@1 (seed mean, 95% CI)")
    handles = [Line2D([], [], color="black", linestyle="dashed", linewidth=1, label="base model")]
    handles += [Patch(facecolor="gray", edgecolor="white", hatch=hatch[beta], label=f"β = {beta:g}") for beta in betas]
    figure.legend(handles=handles, loc="outside right center", fontsize=8)
    title(figure, claim, "bar: mean over seeds and problems; whisker: bootstrap 95% interval", width=110)
    save(figure, out, name)
