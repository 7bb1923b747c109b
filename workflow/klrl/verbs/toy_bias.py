"""`klrl toy-bias`: the toy study's table of every KL configuration's exact gradient bias and Monte
Carlo variance (klrl.toy.bias), and with --curves-out the curves over lags and sequence lengths
(klrl.toy.staleness)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "exact gradient bias and Monte Carlo variance on a tabular policy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="CSV to write")
    parser.add_argument("--seed", type=int, default=0, help="seed of πθ, πref, μ and the sampler")
    parser.add_argument("--vocab", type=int, default=3, help="vocabulary size V")
    parser.add_argument("--horizon", type=int, default=4, help="sequence length T")
    parser.add_argument("--samples", type=int, default=4000, help="Monte Carlo batches for the variance")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per batch estimate (≥ 2)")
    parser.add_argument("--lags", type=int, nargs="+", default=[0, 1, 2, 4, 8, 16], help="lags of the staleness curve")
    parser.add_argument(
        "--horizons", type=int, nargs="+", default=[1, 2, 4, 6, 8], help="lengths of the prefix-IS curve (V = 2)"
    )
    parser.add_argument(
        "--curves-out", type=Path, help="folder for by_lag.csv and prefixis_by_horizon.csv (default: no curves)"
    )


def run(args: argparse.Namespace) -> None:
    from klrl.toy import staleness
    from klrl.toy.bias import markdown_summary, toy_rows, write_csv

    rows = toy_rows(args.vocab, args.horizon, args.seed, args.samples, args.batch_size)
    write_csv(rows, args.out)
    print(markdown_summary(rows), end="")
    print(f"off-policy columns: μ = πθ {rows[0]['lag']} steps ago, TV(μ, πθ) {rows[0]['tv']:.2f} over sequences")
    print(f"wrote {len(rows)} rows to {args.out}")
    if args.curves_out:
        by_lag = staleness.lag_rows(
            args.lags, args.vocab, args.horizon, args.seed, samples=args.samples // 4, batch_size=args.batch_size
        )
        by_horizon = staleness.horizon_rows(
            args.horizons, seed=args.seed, samples=args.samples // 4, batch_size=args.batch_size
        )
        write_csv(by_lag, args.curves_out / "by_lag.csv", staleness.LAG_COLUMNS)
        write_csv(by_horizon, args.curves_out / "prefixis_by_horizon.csv", staleness.HORIZON_COLUMNS)
        print(staleness.curve_markdown(by_lag, "lag", "rel_bias"), end="")
        print(staleness.curve_markdown(by_lag, "lag", "rel_std"), end="")
        print(staleness.curve_markdown(by_horizon, "horizon", "rel_std"), end="")
