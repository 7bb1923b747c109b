"""Final pass@1 per evaluation set, in- and out-of-domain, per configuration (on-policy, each β),
seed mean with bootstrap 95% intervals over seeds and problems; the dashed line is the base model.
Missing configurations are hatched and labelled; the status column says which cells diverged.
Cells: every on-policy cell (results/tables/main.csv)."""

from bars import bars
from style import arguments, read

args = arguments(__doc__)
main = read(args.tables, "main")
bars(main[main["policy"] == "on"], args.out, "benchmark_bars", "on-policy: pass@1 per evaluation set")
