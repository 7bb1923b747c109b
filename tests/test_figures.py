"""Every figure drawn from a synthetic default grid (tests/synthetic_grid.py) with no overlapping
text; the conventions the figures share (paper_figures/helpers/style.py): one colour per KL
configuration, one line style per β, total divergence named in the legend."""

import sys
from pathlib import Path

import pytest

from synthetic_grid import write_grid
from workflow_helpers import FIGURES, draw_figures

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "paper_figures"))
from helpers import style  # noqa: E402


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Path:
    return write_grid(tmp_path_factory.mktemp("grid"))


@pytest.fixture(scope="module")
def drawn(tables, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    out = tmp_path_factory.mktemp("figures")
    return out, draw_figures(tables, out)


@pytest.mark.slow
@pytest.mark.parametrize("figure", FIGURES)
def test_every_figure_renders_without_overlapping_text(drawn, figure):
    out, stderr = drawn
    assert "Traceback" not in stderr[figure], stderr[figure][-3000:]
    assert "overlapping text" not in stderr[figure], stderr[figure]
    assert (out / f"{figure}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / f"{figure}.pdf").read_bytes()[:5] == b"%PDF-"


def test_text_overlaps_names_a_title_hidden_under_a_legend():
    figure, ax = style.plt.subplots()
    ax.plot([0, 1], [0, 1], label="a line with a long enough label")
    ax.set_title("the panel's title")
    assert style.text_overlaps(figure) == []
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 0.98))
    assert style.text_overlaps(figure) == ['axes 0 legend / axes 0 text "the panel\'s title"']
    style.plt.close(figure)


def test_a_configuration_without_a_colour_is_an_error_naming_it():
    with pytest.raises(KeyError, match="no colour for KL configuration 'k4-loss'"):
        style.color("k4-loss")


def test_line_style_per_beta_largest_solid():
    styles = style.beta_styles([0.0, 0.1, 1.0, 0.1, 0.3])
    assert styles[1.0] == "-" and styles[0.0] == "-"
    assert len({str(styles[b]) for b in (1.0, 0.3, 0.1)}) == 3


def test_legend_says_when_every_seed_or_some_seeds_diverged(tables):
    curves = style.read_curves(tables)
    figure, ax = style.plt.subplots()
    selection = [("k3-reward", 0.1, "on"), ("k1-loss", 1.0, "on"), ("k2-loss", 1.0, "on"), ("k1-reward", 0.1, "on")]
    handles = style.plot_curves(ax, curves, "eval_pass@1", selection, style.beta_styles(curves["beta"]))
    assert [h.get_label() for h in handles] == [
        "k3-reward, β = 0.1 (all seeds diverged)",
        "k1-loss, β = 1 (1 of 2 seeds diverged)",
        "k2-loss, β = 1 (missing)",
        "k1-reward, β = 0.1",
    ]
    style.plt.close(figure)


def test_every_config_has_a_line_style_and_a_hatch_per_beta(repo_root):
    """The paper's grid has five values of β; each config's β list must get distinct styles."""
    import yaml

    from helpers import bars

    for path in sorted([*(repo_root / "config").glob("*.yaml"), *(repo_root / ".test" / "config").glob("*.yaml")]):
        betas = {float(b) for group in yaml.safe_load(path.read_text())["groups"] for b in group["beta"]}
        styles = style.beta_styles(betas)
        assert len({str(styles[b]) for b in betas if b > 0}) == len([b for b in betas if b > 0]), path.name
        assert len([b for b in betas if b > 0]) <= len(bars.HATCHES), path.name
