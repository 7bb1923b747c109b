# The benchmarks' make targets (benchmarks/README.md; their figures in benchmarks/RESULTS.md),
# included by the Makefile, which defines VENV, BIN, STAMP and PIP_INSTALL. Each bench-* target
# prints its table and a one-line verdict per target; none needs a pretrained model. `make bench`
# runs them all (about 25 min on 2 cores) and ends with every verdict, gathered in $(VERDICTS).
.PHONY: bench bench-trl bench-trl-long bench-sampling bench-dag bench-grid bench-eval bench-grading bench-tests

BENCH_STAMP := $(VENV)/.installed-bench
VERDICTS := results/bench-verdicts.txt
# The tree whose grid the 2× grid-throughput target is measured against (the speed targets' baseline).
GRID_BEFORE ?= e6a6436

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python $(PIP_INSTALL) -c requirements/constraints.txt -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	mkdir -p results && rm -f $(VERDICTS)
	KLRL_BENCH_VERDICTS=$(CURDIR)/$(VERDICTS) $(MAKE) --keep-going bench-trl bench-trl-long bench-sampling bench-dag bench-grid bench-eval bench-grading bench-tests; \
		status=$$?; echo; cat $(VERDICTS); exit $$status

bench-trl: $(BENCH_STAMP)
	$(BIN)/python benchmarks/trl_step.py

bench-trl-long: $(BENCH_STAMP)
	$(BIN)/python benchmarks/trl_step.py --new-tokens 64 --reps 3

bench-sampling: $(STAMP)
	$(BIN)/python benchmarks/sampling.py

bench-dag: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python benchmarks/dag.py

bench-grid: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python benchmarks/grid_time.py --cores 2 --before $(GRID_BEFORE)

bench-eval: $(STAMP)
	$(BIN)/python benchmarks/eval_overhead.py

bench-grading: $(STAMP)
	$(BIN)/python benchmarks/grading.py

bench-tests: $(STAMP)
	$(BIN)/python benchmarks/test_loop.py
