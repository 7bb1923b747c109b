"""What every figure script shares: reading the tables, one palette, curves with seed bands, checks.

Figures read only results/tables/ (written by `klrl aggregate`) and write <name>.png and
<name>.pdf under --out. Conventions, the same in every figure:

- colour: one per KL configuration (klrl.objective.estimators.STANDARD_CONFIGS; an unknown name is an error, never a silent black);
- line style: one per β, from the largest β of the grid (solid) down (dashed, dotted, dash-dot);
  no markers on the lines, so the style stays visible in the legend;
- seeds: the mean over seeds as a line, the range over seeds as a band, each seed faint;
- a seed that diverged ends in ×; a configuration whose every seed diverged says so in its legend
  entry (`all seeds diverged`), one with no results at all says `missing`;
- NaN values are dropped point by point and counted in the x label, so nothing disappears silently;
- the figure's title states the claim it tests, marked "Claim tested:"; `text_overlaps` checks that no text collides.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from itertools import combinations
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from klrl.objective.estimators import STANDARD_CONFIGS  # noqa: E402  (each configuration's colour)

HERE = Path(__file__).parents[1]  # paper_figures/
LINE_STYLES = [
    "-",
    (0, (5, 2)),
    (0, (1.5, 1.5)),
    (0, (6, 2, 1.5, 2)),
    (0, (3, 1.5, 1, 1.5, 1, 1.5)),
    (0, (9, 3)),
]  # largest β first
plt.rcParams.update(
    {
        "figure.dpi": 110,
        "savefig.dpi": 200,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "font.size": 9,
        "legend.handlelength": 3.5,
        "legend.frameon": False,
        "pdf.fonttype": 42,
    }
)


def color(kl: str) -> str:
    """The KL configuration's colour (klrl.objective.estimators.STANDARD_CONFIGS); another name is an error naming it."""
    if kl not in STANDARD_CONFIGS:
        raise KeyError(
            f"no colour for KL configuration {kl!r}: add it to STANDARD_CONFIGS in workflow/klrl/objective/estimators.py"
        )
    return STANDARD_CONFIGS[kl]


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--tables", type=Path, default=Path("results/tables"), help="klrl aggregate's output folder")
    parser.add_argument("--out", type=Path, default=HERE, help="folder for <name>.png and <name>.pdf")
    return parser.parse_args()


def read(tables: Path, name: str) -> pd.DataFrame:
    path = tables / f"{name}.csv"
    if not path.is_file():
        raise SystemExit(
            f"{path}: missing; run `snakemake --cores all aggregate` (or `python -m klrl aggregate`) first"
        )
    return pd.read_csv(path)


def read_curves(tables: Path) -> pd.DataFrame:
    """curves.csv with each cell's training status (scores.csv) in a `status` column."""
    curves = read(tables, "curves")
    statuses = read(tables, "scores").drop_duplicates("cell").set_index("cell")["status"]
    return curves.assign(status=curves["cell"].map(statuses).fillna("unknown"))


def title(figure, claim: str, note: str = "", width: int = 100) -> None:
    """The figure's title: the claim it tests, marked as such (the data may not bear it out: the
    claims table says whether they do), wrapped at `width` characters, then a note on how to read it."""
    figure.suptitle(textwrap.fill(f"Claim tested: {claim}", width) + (f"\n{note}" if note else ""), fontsize=10)


def _visible_tick_labels(axis, limits) -> list:
    low, high = sorted(limits)
    return [
        tick.label1 for tick in axis.get_major_ticks() if low <= tick.get_loc() <= high and tick.label1.get_visible()
    ]


def _text_boxes(figure) -> list[tuple[str, str, object]]:
    """(name, group, box) of every drawn text; the rotated tick labels of one axis share a group."""
    renderer = figure.canvas.get_renderer()
    texts = [(f"figure text {text.get_text()[:40]!r}", "", text) for text in figure.texts]
    boxes = [("figure legend", "", legend.get_window_extent(renderer)) for legend in figure.legends]
    for i, ax in enumerate(figure.axes):
        texts += [
            (f"axes {i} text {text.get_text()[:40]!r}", "", text)
            for text in (ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts)
        ]
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            texts += [
                (f"axes {i} tick {label.get_text()!r}", f"{i}{axis.axis_name}" if label.get_rotation() else "", label)
                for label in _visible_tick_labels(axis, limits)
            ]
        if ax.get_legend() is not None:
            boxes.append((f"axes {i} legend", "", ax.get_legend().get_window_extent(renderer)))
    boxes += [
        (name, group, text.get_window_extent(renderer))
        for name, group, text in texts
        if text.get_visible() and text.get_text()
    ]
    return boxes


def text_overlaps(figure) -> list[str]:
    """Every pair of drawn texts (titles, axis and tick labels, annotations, legends) whose rendered
    boxes overlap, as 'a / b'; empty when none do. Rotated tick labels of one axis are not compared
    with each other: their boxes overlap by construction (matplotlib spaces them by their angle)."""
    figure.canvas.draw()
    overlaps = []
    for (a, group_a, box_a), (b, group_b, box_b) in combinations(_text_boxes(figure), 2):
        if box_a.overlaps(box_b) and not (group_a and group_a == group_b):
            overlaps.append(f"{a} / {b}")
    return overlaps


def save(figure, out: Path, name: str) -> None:
    """Writes <name>.png and .pdf, then reports any overlapping text on stderr."""
    out.mkdir(parents=True, exist_ok=True)
    figure.savefig(out / f"{name}.png", bbox_inches="tight")
    figure.savefig(out / f"{name}.pdf", bbox_inches="tight")
    for overlap in text_overlaps(figure):
        print(f"{name}: overlapping text: {overlap}", file=sys.stderr)
    plt.close(figure)
    print(f"{out / name}.png, .pdf")


def beta_styles(betas) -> dict[float, object]:
    """Line style per β: the largest solid, then dashed, dotted, dash-dot, dash-dot-dot, long dash;
    β = 0 (no KL) solid."""
    ordered = sorted({float(b) for b in betas if b > 0}, reverse=True)
    if len(ordered) > len(LINE_STYLES):
        raise ValueError(f"{len(ordered)} values of β, but only {len(LINE_STYLES)} line styles")
    return {0.0: "-"} | dict(zip(ordered, LINE_STYLES))


def config_label(kl: str, beta: float) -> str:
    return kl if kl == "none" else f"{kl}, β = {beta:g}"


def plot_curves(ax, curves: pd.DataFrame, metric: str, selection: list[tuple[str, float, str]], styles: dict) -> list:
    """One configuration per selected (kl, β, policy): the seed mean of `metric` against step
    (drawn while every seed still has a value), the range over seeds as a band, each seed faint
    and ending in × if it diverged. Returns the legend handles, one per configuration."""
    rows = curves[curves["metric"] == metric]
    handles, dropped = [], 0
    for kl, beta, policy in selection:
        style = {"color": color(kl), "linestyle": styles[float(beta)]}
        config = curves[(curves["kl"] == kl) & (curves["beta"] == beta) & (curves["policy"] == policy)]
        cells = rows[(rows["kl"] == kl) & (rows["beta"] == beta) & (rows["policy"] == policy)]
        diverged = config.drop_duplicates("cell")["status"].eq("diverged")
        label = config_label(kl, beta)
        if config.empty:
            label += " (missing)"
        elif diverged.all():
            label += " (all seeds diverged)"
        elif diverged.any():
            label += f" ({diverged.sum()} of {len(diverged)} seeds diverged)"
        handles.append(Line2D([], [], linewidth=1.8, label=label, **style))
        if cells.empty:
            continue
        dropped += int(cells["value"].isna().sum())
        finite = cells.dropna(subset=["value"])
        wide = finite.pivot_table(index="step", columns="cell", values="value")
        for cell, seed in wide.items():
            seed = seed.dropna()
            ax.plot(seed.index, seed.to_numpy(), linewidth=0.7, alpha=0.3, **style)
            if (cells.loc[cells["cell"] == cell, "status"] == "diverged").any():
                ax.plot(
                    seed.index[-1:],
                    seed.to_numpy()[-1:],
                    marker="x",
                    markersize=8,
                    markeredgewidth=1.8,
                    linestyle="none",
                    color=style["color"],
                )
        complete = wide.dropna()
        if len(wide.columns) > 1:
            ax.fill_between(
                complete.index,
                complete.min(axis=1),
                complete.max(axis=1),
                color=style["color"],
                alpha=0.15,
                linewidth=0,
            )
        ax.plot(complete.index, complete.mean(axis=1), linewidth=1.8, **style)
    ax.set_xlabel("training step" + (f"  ({dropped} NaN value{'s' * (dropped > 1)} not drawn)" if dropped else ""))
    return handles


def curve_figure(
    curves: pd.DataFrame,
    selection: list[tuple[str, float, str]],
    panels: list[tuple[str, str]],
    claim: str,
    out: Path,
    name: str,
) -> None:
    """One panel per (metric, y label), each with the selected configurations' curves; one legend
    for the figure, outside the panels."""
    figure, axes = plt.subplots(
        1,
        len(panels),
        figsize=(4.3 * len(panels) + (3.2 if len(panels) == 1 else 0.6), 3.9 if len(panels) == 1 else 4.3),
        squeeze=False,
        layout="constrained",
    )
    styles = beta_styles(curves["beta"])
    for ax, (metric, ylabel) in zip(axes[0], panels):
        handles = plot_curves(ax, curves, metric, selection, styles)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)  # every curve metric is ≥ 0: accuracies, entropy, KL
    handles.append(
        Line2D(
            [],
            [],
            color="gray",
            marker="x",
            markersize=8,
            markeredgewidth=1.8,
            linestyle="none",
            label="a seed diverged here",
        )
    )
    if len(panels) == 1:
        figure.legend(handles=handles, loc="outside right center", fontsize=8)
    else:
        figure.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)), fontsize=8)
    title(
        figure,
        claim,
        "line: seed mean; band: range over seeds; faint lines: each seed",
        width=int(13 * figure.get_figwidth()),
    )
    save(figure, out, name)


PASS_AT_1 = ("eval_pass@1", "in-domain pass@1 (held out)")
TRAIN_ACCURACY = ("train_accuracy", "training accuracy")
