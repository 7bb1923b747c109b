# The whole grid in one command: snakemake --cores all [--configfile config/<name>.yaml]
# prepare data → build base models → track (MLflow runs) → train → evaluate → aggregate → figures.
# Every rule is a thin call of `python -m klrl <verb>`; the logic lives in workflow/klrl.
import sys
import time

from snakemake.utils import min_version, validate

from klrl.grid.config_check import check_config, named_files
from klrl.tracking.credentials import tracking_server_problem
from klrl.grid.snakemake_locks import own_locks, release_stale_locks

min_version("9.0")

# The grid's wall time counts from here: each invocation that runs jobs records its start, end,
# jobs and cores when it ends (klrl.grid.wall_time, tracking.smk's onsuccess and onerror).
STARTED = time.time()


# The default config unless a --configfile is given: Snakemake would otherwise merge a
# --configfile into it key by key, and the default grid's settings would leak into other configs.
# `--config key=value` alone overrides keys of the default config.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# Locks left by a Snakemake killed with -9 (their owner, recorded at onstart, is gone) are
# removed, so that the same command runs again without --unlock (klrl.grid.snakemake_locks).
if workflow.is_main_process:
    release_stale_locks(".snakemake/locks")


# Before anything else, a bad config is one line naming its file and the key (klrl.grid.config_check),
# never a traceback; then Snakemake's validation, which fills in the defaults.
try:
    check_config(config, named_files(workflow.overwrite_configfiles or ["config/config.yaml"]))
except ValueError as error:
    sys.exit(str(error))
validate(config, "workflow/schemas/config.schema.yaml")
# A tracking server that is unreachable or refuses the grid's credentials stops it here, in one
# line naming the URI, before any job starts.
if workflow.is_main_process and (problem := tracking_server_problem(config)):
    sys.exit(problem)


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/tracking.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/toy.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/unknown_cell.smk"


rule all:
    input:
        str(LAYOUT.tables("main.csv")),
        [str(LAYOUT.figures(f"{figure}.png")) for figure in FIGURES],
        str(LAYOUT.figures_marker()),
    default_target: True
