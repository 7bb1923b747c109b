"""Grouped bars with intervals, shared by the bar figures: one panel per evaluation set."""

import numpy as np
from style import COLORS, plt, save

DOMAINS = {"in": "in-domain", "out": "out-of-domain"}


def bars(rows, out, name: str, title: str) -> None:
    """rows: main.csv rows. Missing values are hatched placeholders labelled `missing`; a
    configuration with a diverged cell has `(diverged)` under its bar."""
    tasks = [task for task in dict.fromkeys(rows["task"]) if isinstance(task, str)] or ["(no results)"]
    configs = list(dict.fromkeys(zip(rows["kl"], rows["beta"])))
    figure, axes = plt.subplots(1, len(tasks), figsize=(4 * len(tasks), 3.8), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        x = np.arange(len(configs))
        for i, (kl, beta) in enumerate(configs):
            row = rows[(rows["kl"] == kl) & (rows["beta"] == beta) & (rows["task"] == task)]
            value = row["pass@1"].iloc[0] if len(row) else np.nan
            if np.isnan(value):
                ax.bar(x[i], 0.02, color="white", edgecolor="gray", hatch="xx")
                ax.text(x[i], 0.03, "missing", rotation=90, fontsize=7, ha="center", va="bottom")
                continue
            err = [[value - row["ci_lo"].iloc[0]], [row["ci_hi"].iloc[0] - value]]
            ax.bar(x[i], value, color=COLORS.get(kl, "k"), yerr=err, capsize=3, alpha=0.6 if beta != max(b for _, b in configs) else 1.0)
            if "diverged" in str(row["status"].iloc[0]):
                ax.text(x[i], value + 0.02, "diverged", rotation=90, fontsize=7, ha="center", va="bottom")
            if not np.isnan(row["base_pass@1"].iloc[0]):
                ax.hlines(row["base_pass@1"].iloc[0], -0.5, len(configs) - 0.5, colors="gray", linestyles="dashed", linewidth=0.8)
        ax.set_xticks(x, [kl if kl == "none" else f"{kl} β{beta:g}" for kl, beta in configs], rotation=70, ha="right", fontsize=7)
        domain = rows.loc[rows["task"] == task, "domain"]
        ax.set_title(f"{task} ({DOMAINS.get(domain.iloc[0], '?')})" if len(domain) else task)
        ax.set_ylabel("pass@1")
    figure.suptitle(title)
    save(figure, out, name)
