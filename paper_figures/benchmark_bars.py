"""Final pass@1 on every evaluation set, in- and out-of-domain, for each on-policy configuration at
each β: the mean over seeds and problems with a bootstrap 95% interval over both, beside the base
model (dashed). The paper's claim: K1 in the reward scores best, in and out of domain, and K3 in the
loss trails it most out of domain. Cells: every on-policy cell (results/tables/main.csv)."""

from helpers.bars import bars
from helpers.style import arguments, read

args = arguments(__doc__)
main = read(args.tables, "main")
bars(
    main[main["policy"] == "on"],
    args.out,
    "benchmark_bars",
    "K1 in the reward scores best in and out of domain; K3 in the loss trails it most out of domain",
    main["beta"],
)
