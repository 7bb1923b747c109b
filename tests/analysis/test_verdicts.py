"""Claims table on synthetic grids whose truth is known: planted effects found, null effects called
inconclusive at the stated rates, the interval's coverage, and the table the aggregate step writes."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from klrl.analysis.tables import aggregate
from klrl.analysis.contrasts import SeedPool, Variance, contrast
from klrl.grid.expansion import expand_grid
from klrl.analysis.simulation import Scenario, simulate_grid
from klrl.analysis.claims import CLAIMS
from klrl.analysis.claim_family import decide_claims

from conftest import write_cell_settings
from workflow_helpers import load_config

CLAIM = {claim.name: claim for claim in CLAIMS}
GRIDS = 200


def _verdict_counts(claim: str, effect: float, scenario: Scenario, seed: int) -> dict[str, int]:
    """Verdicts of `claim`'s two-configuration contrast over GRIDS synthetic grids of 8 configurations."""
    rng = np.random.default_rng(seed)
    counts = {"reproduced": 0, "contradicted": 0, "absent at its size": 0, "inconclusive": 0}
    for _ in range(GRIDS):
        grid = simulate_grid(scenario, [effect] + [0.0] * 7, rng)
        tested = contrast(
            [(1.0, grid[0], Variance.POOLED), (-1.0, grid[1], Variance.POOLED)], SeedPool.from_matrices(grid)
        )
        [decided] = decide_claims([(CLAIM[claim].side, "every", [tested])])  # a family of one claim of one row
        counts[decided["verdict"].removesuffix(", below its size")] += 1
    return counts


def test_a_planted_effect_is_found_and_a_null_one_is_inconclusive():
    scenario = Scenario(seed_sd=0.03, seeds=3)
    planted = _verdict_counts("k1-reward-beats-k3-loss-in", 0.15, scenario, seed=1)
    assert planted["reproduced"] >= 0.95 * GRIDS and planted["contradicted"] == 0
    null = _verdict_counts("k1-reward-beats-k3-loss-in", 0.0, scenario, seed=2)
    assert null["reproduced"] <= 0.08 * GRIDS  # one-sided at 5%, with the simulation's spread
    reversed_ = _verdict_counts("k1-reward-beats-k3-loss-in", -0.15, scenario, seed=3)
    assert (
        reversed_["contradicted"] >= 0.9 * GRIDS
    )  # at 0.45 the seed spread is wider than at 0.75 and reversed_["reproduced"] == 0


def test_equivalence_is_reproduced_only_when_the_difference_is_inside_the_margin():
    tight = Scenario(seed_sd=0.005, seeds=5, samples=16, problems=400, interaction_sd=0.1)
    equal = _verdict_counts("k3-both-matches-k1-reward", 0.0, tight, seed=4)
    assert equal["reproduced"] >= 0.95 * GRIDS and equal["contradicted"] == 0
    apart = _verdict_counts("k3-both-matches-k1-reward", 0.10, Scenario(seed_sd=0.03, seeds=3), seed=5)
    assert apart["reproduced"] == 0 and apart["contradicted"] >= 0.4 * GRIDS


@pytest.mark.parametrize("seed_sds", [(0.06, 0.06), (0.15, 0.06)])
def test_the_interval_covers_the_true_difference_at_least_93_percent(seed_sds):
    scenario = Scenario(seed_sd=0.06, seeds=2)
    rng = np.random.default_rng(6)
    covered = 0
    for _ in range(GRIDS):
        grid = simulate_grid(scenario, [0.05] + [0.0] * 13, rng, seed_sds=[seed_sds[0]] + [seed_sds[1]] * 13)
        lo, hi = contrast(
            [(1.0, grid[0], Variance.POOLED), (-1.0, grid[1], Variance.POOLED)], SeedPool.from_matrices(grid)
        ).interval(0.95)
        covered += lo <= 0.05 <= hi
    assert covered >= 0.93 * GRIDS


def test_contrast_standard_error_is_the_seed_spread_when_problems_add_nothing():
    pattern = np.array([0.2, 0.4, 0.6, 0.5])
    a = pattern + np.array([[0.1], [0.3]])  # seed means 0.525, 0.725: variance 0.02, no residual
    b = pattern + np.zeros((2, 1))  # the same per-problem pattern: no interaction
    tested = contrast([(1.0, a, Variance.POOLED), (-1.0, b, Variance.POOLED)])
    assert tested.effect == pytest.approx(0.2)
    assert tested.se == pytest.approx(0.1) and tested.df == pytest.approx(1.0)  # √(0.02 / 2), Welch df n − 1
    assert tested.interval(0.95) == pytest.approx((0.2 - 12.7062 * 0.1, 0.2 + 12.7062 * 0.1), abs=1e-4)
    pooled = contrast(
        [(1.0, a, Variance.POOLED), (-1.0, b, Variance.POOLED)], SeedPool(seed_var=0.05, seed_df=20, residual_var=0.0)
    )
    assert pooled.se == pytest.approx(np.sqrt(0.05 / 2 + 0.05 / 2)) and pooled.df == pytest.approx(20)
    alone = contrast([(1.0, a[:1], Variance.POOLED), (-1.0, b[:1], Variance.POOLED)])
    assert np.isnan(alone.interval(0.95)[0])
    with pytest.raises(ValueError, match="same 4 problems"):
        contrast([(1.0, a, Variance.POOLED), (-1.0, b[:, :3], Variance.POOLED)])


PROBLEMS = [f"arith-test-{i:05d}" for i in range(150)]


def test_the_default_grid_holds_every_claims_decisive_comparison(tmp_path):
    """Every cell of config/config.yaml evaluated (random scores): each claim gets a verdict row,
    none is "not in this grid"; the growth claims compare neighbouring β and lag values."""
    root, rng = tmp_path / "results", np.random.default_rng(0)
    cells = expand_grid(load_config("config")).values()
    for cell in cells:
        write_cell_settings(root, cell.id, kl=cell.kl, beta=cell.beta, seed=cell.seed, lag=cell.train["async_lag"])
        (root / "cells" / cell.id / "train" / "status.json").write_text(json.dumps({"status": "completed", "step": 40}))
        _write_eval(root / "cells" / cell.id / "eval", {task: rng.uniform(0, 1, 150) for task in cell.eval_tasks})
    _write_eval(
        root / "base" / "tiny" / "eval",
        {task: rng.uniform(0, 1, 150) for task in ("arith", "arith-long", "arith-spoken")},
    )
    aggregate([cell.id for cell in cells], root / "tables", root=root)
    claims = pd.read_csv(root / "tables" / "claims.csv")
    assert set(claims["claim"]) == set(CLAIM) and "not in this grid" not in set(claims["verdict"])
    growth = pd.read_csv(root / "tables" / "claim_rows.csv").set_index("claim")
    assert (
        growth.loc["k1-loss-worsens-with-beta", "beta"] == "0.1→1"
        and growth.loc["k1-loss-degrades-with-lag", "lag"] == "4→16"
    )


def test_a_growth_claim_is_decided_at_each_step_of_the_axis_and_never_by_a_term_at_the_floor(tmp_path):
    """K1 in the loss drops from lag 1 to 2 while K1 in the reward holds: the 1→2 step reproduces
    the degradation. At lag 16 both have collapsed in every seed (pass@1 below half the base's):
    the 2→16 step is `at floor`, with the reason, and left out of the pooled claim; no end-to-end
    1→16 row."""
    root, rng = tmp_path / "results", np.random.default_rng(4)
    means = {
        ("k1-loss", 1): 0.6,
        ("k1-loss", 2): 0.35,
        ("k1-loss", 16): 0.0,
        ("k1-reward", 1): 0.75,
        ("k1-reward", 2): 0.72,
        ("k1-reward", 16): 0.05,
    }
    cells = []
    for (kl, lag), mean in means.items():
        for seed in range(4):
            scores = np.clip(mean + rng.normal(0, 0.02) + rng.normal(0, 0.1, 150), 0, 1)
            cells.append(_write_cell(root, kl, 0.1, lag, seed, {"arith": scores}))
    _write_eval(root / "base" / "tiny" / "eval", {"arith": np.full(150, 0.5)})
    aggregate(cells, root / "tables", root=root)
    claims = pd.read_csv(root / "tables" / "claim_rows.csv")
    decided = pd.read_csv(root / "tables" / "claims.csv").set_index("claim")
    rows = claims[claims["claim"] == "k1-loss-degrades-with-lag"].set_index("lag")
    assert sorted(rows.index) == ["1→2", "2→16"]
    assert rows.loc["1→2", "effect"] == pytest.approx(-0.22, abs=0.05) and rows.loc["1→2", "verdict"] == "descriptive"
    assert decided.loc["k1-loss-degrades-with-lag", "verdict"] == "reproduced"  # pooled over the steps it can test
    assert decided.loc["k1-loss-degrades-with-lag", "effect"] == pytest.approx(rows.loc["1→2", "effect"])
    floor = rows.loc["2→16"]
    assert floor["verdict"] == "at floor" and np.isnan(floor["p"])
    assert (
        floor["reason"]
        == "every seed of k1-loss(off)@laghigh collapsed (4); every seed of k1-reward(off)@laghigh collapsed (4)"
    )
    rates = claims[claims["claim"] == "k1-loss-collapses-more-with-lag"].set_index("lag")
    assert rates.loc["2→16", "collapsed"] == "4/0" and rates.loc["2→16", "p"] == pytest.approx(
        1 / 70
    )  # Fisher one-sided, 4 of 4 vs 0 of 4
    assert rates.loc["1→2", "collapsed"] == "0/0" and rates.loc["1→2", "p"] == 1.0
    # at every step of the lag: 1→2 shows no rise, so the claim is not reproduced
    assert decided.loc["k1-loss-collapses-more-with-lag", "verdict"] == "inconclusive"


def _write_cell(root: Path, kl: str, beta: float, lag: int, seed: int, per_task: dict[str, np.ndarray]) -> str:
    cell = f"tiny__{kl}__b{beta:g}__{f'off-lag{lag}' if lag else 'on'}__s{seed}"
    train = write_cell_settings(root, cell, kl=kl, beta=beta, seed=seed, lag=lag).parent
    (train / "status.json").write_text(json.dumps({"status": "completed", "step": 40}))
    _write_eval(root / "cells" / cell / "eval", per_task)
    return cell


def _write_eval(folder: Path, per_task: dict[str, np.ndarray]) -> None:
    (folder / "samples").mkdir(parents=True)
    for task, values in per_task.items():
        lines = [json.dumps({"id": pid, "pass@1": float(v)}) for pid, v in zip(PROBLEMS, values)]
        (folder / "samples" / f"{task}.jsonl").write_text("\n".join(lines) + "\n")
    tasks = {task: {"pass@1": float(np.mean(v)), "problems": len(v)} for task, v in per_task.items()}
    (folder / "results.json").write_text(json.dumps({"tasks": tasks}))


@pytest.fixture
def planted_grid(tmp_path) -> tuple[Path, dict]:
    """On-policy k1-reward 0.15 above k3-loss and k3-reward (arith); k3-both equal to k1-reward;
    three seeds; no off-policy cells. arith-long: no effect."""
    root = tmp_path / "results"
    rng = np.random.default_rng(11)
    scenario = Scenario(seed_sd=0.02, seeds=3, problems=150)
    effects = {"k1-reward": 0.15, "k3-both": 0.15, "k3-loss": 0.0, "k3-reward": 0.0}
    in_domain = dict(zip(effects, simulate_grid(scenario, list(effects.values()), rng)))
    out_domain = dict(zip(effects, simulate_grid(scenario, [0.0] * 4, rng)))
    cells = [
        _write_cell(root, kl, 0.1, 0, seed, {"arith": in_domain[kl][seed], "arith-long": out_domain[kl][seed]})
        for kl in effects
        for seed in range(3)
    ]
    _write_eval(
        root / "base" / "tiny" / "eval",
        {"arith": in_domain["k3-reward"].mean(0) + 0.2, "arith-long": out_domain["k3-loss"][0]},
    )
    aggregate(cells, root / "tables", root=root)
    return root, in_domain


def test_aggregate_writes_the_claims_table_with_verdicts_from_the_data(planted_grid):
    root, in_domain = planted_grid
    rows = pd.read_csv(root / "tables" / "claim_rows.csv")
    claims = pd.read_csv(root / "tables" / "claims.csv").set_index("claim")
    assert (root / "tables" / "claims.md").is_file() and (root / "tables" / "claim_rows.md").is_file()
    row = rows[rows["claim"] == "k1-reward-beats-k3-loss-in"].iloc[0]
    assert row["effect"] == pytest.approx(in_domain["k1-reward"].mean() - in_domain["k3-loss"].mean())
    assert (row["verdict"], row["task"], row["beta"], row["seeds"]) == ("descriptive", "arith", 0.1, "3/3")
    assert row["ci_lo"] > 0 and row["p"] < 0.05
    claim = claims.loc["k1-reward-beats-k3-loss-in"]
    assert (claim["verdict"], claim["rows"], claim["size"]) == ("reproduced", 1, 0.04)
    assert claim["effect"] == pytest.approx(row["effect"]) and claim["p_present"] <= claim["p_present_adjusted"] < 0.05
    out = rows[rows["claim"] == "k1-reward-beats-k3-loss-out"].iloc[0]
    assert (out["task"], claims.loc["k1-reward-beats-k3-loss-out", "verdict"]) == ("arith-long", "inconclusive")
    collapse = rows[rows["claim"] == "k3-reward-collapses"].iloc[0]  # no seed below half the base's 0.8
    assert (collapse["test"], collapse["collapsed"], collapse["p"]) == ("exact", "0/0", 1.0)
    assert claims.loc["k3-reward-collapses", "verdict"] != "reproduced"  # 0 of 3 against 0 of 3 shows nothing
    both = rows[rows["claim"] == "k3-both-matches-k1-reward"].iloc[0]
    assert both["ci_level"] == 0.90 and claims.loc["k3-both-matches-k1-reward", "verdict"] != "contradicted"
    absent = claims[claims["verdict"] == "not in this grid"].index
    assert set(absent) == {
        "k1-loss-worsens-with-beta",
        "k1-loss-collapses",
        "k1-both-matches-k1-reward",
        "kl-stabilises-off-policy",
        "k3-loss-stabilises-off-policy",
        "k1-loss-collapses-off-policy",
        "k1-loss-falls-behind-off-policy",
        "k1-reward-ahead-off-policy",
        "k1-loss-collapses-more-with-lag",
        "k1-loss-degrades-with-lag",
    }


def test_the_variance_table_holds_the_pooled_seed_and_residual_sds(planted_grid):
    root, in_domain = planted_grid
    variance = pd.read_csv(root / "tables" / "variance.csv").set_index("task")
    assert list(variance.index) == ["arith", "arith-long"] and list(variance["domain"]) == ["in", "out"]
    row = variance.loc["arith"]
    assert (row["configurations"], row["seeds"], row["problems"], row["seed_df"]) == (4, 12, 150, 8)
    seed_var = np.mean([matrix.mean(1).var(ddof=1) for matrix in in_domain.values()])  # 3 seeds each: equal weights
    assert row["seed_sd"] == pytest.approx(np.sqrt(seed_var))
    residuals = [m - m.mean(1, keepdims=True) - m.mean(0, keepdims=True) + m.mean() for m in in_domain.values()]
    assert row["residual_sd"] == pytest.approx(np.sqrt(sum(np.square(r).sum() for r in residuals) / (4 * 2 * 149)))


def test_readme_results_rewrites_only_the_claims_block_from_the_table(planted_grid, tmp_path, capsys):
    root, _ = planted_grid
    readme = tmp_path / "README.md"
    readme.write_text(
        "# title\nbefore\n<!-- claims:study:begin -->\nhand-written: reproduced!\n<!-- claims:study:end -->\nafter\n"
        "<!-- table:study:main:begin -->\n| typed | 0.5 |\n<!-- table:study:main:end -->\nend\n"
    )
    _readme_results(root, readme, "config/study.yaml", "2 h 40 min", "--commit", "abc1234")
    text = readme.read_text()
    assert text.startswith("# title\nbefore\n<!-- claims:study:begin -->\n") and text.endswith(
        "<!-- table:study:main:end -->\nend\n"
    )
    assert (
        "<!-- claims:study:end -->\nafter\n<!-- table:study:main:begin -->\nGenerated by `python -m klrl readme-results` from `main.md`"
        in text
    )
    main_table = (root / "tables" / "main.md").read_text()
    assert (
        text.split("<!-- table:study:main:begin -->\n")[1].split("\n", 2)[2]
        == main_table.rstrip("\n") + "\n<!-- table:study:main:end -->\nend\n"
    )
    assert "hand-written" not in text and "typed" not in text
    assert (
        "of the run of `config/study.yaml` (run time 2 h 40 min). Cells trained at commit `abc1234` (the cells record "
        "no commit of their own). No plan was recorded before this run; its analysis plan hashes to `"
    ) in text
    claims = pd.read_csv(root / "tables" / "claims.csv")
    rows = pd.read_csv(root / "tables" / "claim_rows.csv")
    claim = claims[claims["claim"] == "k1-reward-beats-k3-loss-in"].iloc[0]
    paper = "- K1 in the reward ahead of K3 in the loss, in domain (the paper's ≥, tested as superiority)"
    line = next(line for line in text.splitlines() if line.startswith(f"{paper} (tiny): **reproduced** "))
    assert (
        f"(mean, pooled over 1 row: estimate {claim['effect']:+.3f}, p of presence {claim['p_present_adjusted']:.3g}, "
        f"p of its size {claim['p_size_adjusted']:.3g} (adjusted); size 0.04: half the paper's" in line
    )
    row = rows[rows["claim"] == "k1-reward-beats-k3-loss-in"].iloc[0]
    line = next(line for line in text.splitlines() if line.startswith(f"{paper}: {row['comparison']} on arith"))
    assert (
        f"effect {row['effect']:+.3f}, 95% interval [{row['ci_lo']:.3f}, {row['ci_hi']:.3f}], raw p {row['p']:.3g}"
        in line
    )
    assert (
        "- off-policy, K1 in the loss falls behind K1 in the reward (seeds that did not collapse): **not in this grid**"
        in text
    )
    tested_rows = int((rows["verdict"] != "not in this grid").sum())
    assert sum(line.startswith("- ") for line in text.splitlines()) == len(claims) + tested_rows  # claims, rows
    readme.write_text(
        "<!-- claims:study:begin -->\n<!-- claims:study:end -->\n<!-- table:study:nonesuch:begin -->\n<!-- table:study:nonesuch:end -->\n"
    )
    capsys.readouterr()
    assert _readme_results(root, readme, "c", "1 s") == 2
    assert "table:study:nonesuch block but the run has no such table" in capsys.readouterr().err
    readme.write_text("no markers\n")
    assert _readme_results(root, readme, "c", "1 s") == 2
    assert "no <!-- claims:study:begin -->" in capsys.readouterr().err
    assert readme.read_text() == "no markers\n"


def _claims(model: str, rows: list[tuple[str, str]], text: str = "paper") -> pd.DataFrame:
    """A claims table of (claim, verdict) on `model`, the claim's words (`text`: paper, or a
    mechanism claim's statement) being its name."""
    return pd.DataFrame([{"claim": c, text: f"words of {c}", "model": model, "verdict": v} for c, v in rows])


def test_the_contrast_block_has_one_sentence_per_claim_whose_verdict_differs(planted_grid, tmp_path, capsys):
    from klrl.reports.readme_blocks import contrast_block

    toy = _claims(
        "tiny",
        [("same", "reproduced"), ("flips", "reproduced"), ("shrinks", "reproduced"), ("only-toy", "reproduced"),
         ("untested-here", "contradicted"), ("declared-there", "not testable at this scale")],
    )  # fmt: skip
    smol = _claims(
        "smollm2",
        [("same", "reproduced"), ("flips", "absent at its size"), ("shrinks", "reproduced, below its size"),
         ("untested-here", "not in this grid"), ("declared-there", "reproduced")],
    )  # fmt: skip
    toy_kl = _claims("tiny", [("kl-lowers", "reproduced"), ("kl-same", "reproduced")], "statement")
    smol_kl = _claims("smollm2", [("kl-lowers", "inconclusive"), ("kl-same", "reproduced")], "statement")
    ours = {"claims.csv": smol, "mechanism_claims.csv": smol_kl}
    others = [
        (Path("docs/results/study"), {"claims.csv": toy}),
        (Path("docs/results/mechanism"), {"claims.csv": toy.iloc[:1], "mechanism_claims.csv": toy_kl}),
    ]
    lines = contrast_block("smol", ours, others).splitlines()
    assert lines[0] == "<!-- contrast:smol:begin -->" and lines[-1] == "<!-- contrast:smol:end -->"
    assert "--contrast docs/results/study docs/results/mechanism` from the runs' claim tables" in lines[1]
    assert "of the 6 claims tested both here and in one of those (in its grid, not declared" in lines[1]
    assert ", the 3 whose verdict differs" in lines[1]
    assert lines[3:-1] == [
        "- words of flips: **reproduced** on tiny (docs/results/study), **absent at its size** on smollm2.",
        "- words of shrinks: **reproduced** on tiny (docs/results/study), **reproduced, below its size** on smollm2.",
        "- words of kl-lowers: **reproduced** on tiny (docs/results/mechanism), **inconclusive** on smollm2.",
    ]
    root, _ = planted_grid  # through the verb: the block rewritten, a missing table named in one line
    readme = tmp_path / "README.md"
    readme.write_text(
        "<!-- claims:study:begin -->\n<!-- claims:study:end -->\n<!-- contrast:study:begin -->\n<!-- contrast:study:end -->\n"
    )
    assert _readme_results(root, readme, "c", "1 s", "--contrast", str(root / "tables")) == 0
    assert (
        "tested both here and in one of those (in its grid, not declared not testable at this scale), the 0 whose"
        in (readme.read_text())
    )
    assert _readme_results(root, readme, "c", "1 s", "--contrast", str(root / "tables"), str(tmp_path)) == 2
    assert f"{tmp_path / 'claims.csv'}: no claims table to contrast with" in capsys.readouterr().err


def test_power_and_seeds_needed_follow_the_effect_and_the_seed_spread(capsys):
    from klrl.cli import main
    from klrl.analysis.power_study import power, seeds_needed

    quiet = Scenario(seed_sd=0.01, seeds=3)
    assert power(quiet, effect=0.2, grids=50) == 1.0
    assert power(quiet, effect=0.0, grids=100) <= 0.05  # the false-positive rate of a `greater` claim
    assert seeds_needed(quiet, effect=0.2, grids=50) == 2
    assert seeds_needed(Scenario(seed_sd=0.15), effect=0.05, grids=50, max_seeds=4) is None
    main(["power", "seeds", "--seed-sd", "0.01", "--problems", "150", "--effect", "0.2", "--grids", "50"])
    assert capsys.readouterr().out.splitlines()[-1] == "| 0.01 | 150 | 4 | 2 |"


def _readme_results(root, readme, config, run_time, *extra):
    """`klrl readme-results` on the study tables under `root`, into `readme`."""
    from klrl.cli import main

    tables = ["--tables", str(root / "tables"), "--experiment", "study", "--doc", str(readme)]
    return main(["readme-results", *tables, "--config", config, "--run-time", run_time, *extra])
