"""What every figure script shares: reading the tables, one style, marking missing and diverged cells.

Figures read only results/tables/ (written by `klrl aggregate`) and write <name>.png and
<name>.pdf beside this file (or under --out). A configuration with no data is drawn as an
empty, hatched slot labelled `missing`; a cell that stopped early (diverged) ends its curve with
an ×; NaN values are dropped point by point and the number dropped is written on the axes, so
nothing disappears silently.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).parent
COLORS = {
    "none": "#7f7f7f", "k1-reward": "#1f77b4", "k1-loss": "#d62728", "k1-both": "#17becf", "k2-loss": "#9467bd",
    "k3-reward": "#ff7f0e", "k3-loss": "#2ca02c", "k3-both": "#bcbd22", "k1-loss-tokis": "#e377c2",
    "k3-loss-tokis": "#8c564b", "k1-reward-seqis": "#aec7e8", "k1-reward-prefixis": "#393b79",
}
plt.rcParams.update({"figure.dpi": 110, "axes.spines.top": False, "axes.spines.right": False, "font.size": 9})


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--tables", type=Path, default=Path("results/tables"), help="klrl aggregate's output folder")
    parser.add_argument("--out", type=Path, default=HERE, help="folder for <name>.png and <name>.pdf")
    return parser.parse_args()


def read(tables: Path, name: str) -> pd.DataFrame:
    path = tables / f"{name}.csv"
    if not path.is_file():
        raise SystemExit(f"{path}: missing; run `snakemake --cores all aggregate` (or `python -m klrl aggregate`) first")
    return pd.read_csv(path)


def save(figure, out: Path, name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    figure.savefig(out / f"{name}.png", bbox_inches="tight")
    figure.savefig(out / f"{name}.pdf", bbox_inches="tight")
    plt.close(figure)
    print(f"{out / name}.png, .pdf")


def plot_curves(ax, curves: pd.DataFrame, metric: str, selection: list[tuple[str, float, str]], label) -> None:
    """One line per selected (kl, beta, policy): the seed mean of `metric` against step. A seed
    that stopped before the others ends with ×; NaN values are not drawn but counted on the axes;
    a selection with no data appears in the legend as missing."""
    rows = curves[curves["metric"] == metric]
    dropped = 0
    for kl, beta, policy in selection:
        cells = rows[(rows["kl"] == kl) & (rows["beta"] == beta) & (rows["policy"] == policy)]
        color = COLORS.get(kl, "k")
        if cells.empty:
            ax.plot([], [], color=color, linestyle=":", label=f"{label(kl, beta, policy)} (missing)")
            continue
        dropped += int(cells["value"].isna().sum())
        finite = cells.dropna(subset=["value"])
        mean = finite.groupby("step", as_index=False)["value"].mean()
        ax.plot(mean["step"], mean["value"], marker=".", color=color, label=label(kl, beta, policy),
                linestyle="-" if beta == max(rows["beta"]) or beta == 0 else "--")
        ends = finite.groupby("cell")["step"].max()
        for cell, step in ends[ends < cells["step"].max()].items():
            point = finite[(finite["cell"] == cell) & (finite["step"] == step)]
            ax.plot(point["step"], point["value"], marker="x", markersize=9, color=color, linestyle="none")
    ax.set_xlabel("training step")
    if dropped:
        ax.text(0.01, 0.01, f"{dropped} NaN values not drawn", transform=ax.transAxes, fontsize=7, color="gray")


def beta_label(kl: str, beta: float, policy: str) -> str:
    return kl if kl == "none" else f"{kl} β={beta:g}"


def curve_figure(curves: pd.DataFrame, selection: list[tuple[str, float, str]], panels: list[tuple[str, str]], title: str, out: Path, name: str) -> None:
    """One panel per (metric, y label), each with the selected configurations' seed-mean curves."""
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 1, 3.8), squeeze=False)
    for ax, (metric, ylabel) in zip(axes[0], panels):
        plot_curves(ax, curves, metric, selection, beta_label)
        ax.set_ylabel(ylabel)
    axes[0][0].legend(fontsize=7)
    figure.suptitle(title)
    save(figure, out, name)


PASS_AT_1 = ("eval_pass@1", "in-domain pass@1 (held out)")
TRAIN_ACCURACY = ("train_accuracy", "training accuracy")
