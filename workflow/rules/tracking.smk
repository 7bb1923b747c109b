# The grid's MLflow experiment and runs, created by one job before any other writes to the
# store. Jobs read the runs file through ancient(): re-creating it (the grid grew) re-runs nothing.
# When the workflow starts and ends (no job runs then), runs left RUNNING by killed jobs are
# ended by what the cells' files say (klrl track-reconcile); a failure there only warns. On start,
# this Snakemake also records itself as the owner of its directory locks (klrl.grid.snakemake_locks);
# on exit, it records its wall time, jobs and cores (klrl.grid.wall_time), which the results'
# blocks give as the run time.


onstart:
    own_locks(".snakemake/locks")
    reconcile_runs(log)


onsuccess:
    reconcile_runs(log)
    record_wall_time("success")


onerror:
    reconcile_runs(log)
    record_wall_time("error")


localrules:
    track_grid,


rule track_grid:
    output:
        RUNS,
    params:
        experiment=config["experiment"],
        tracking=tracking_options(),
        cells=" ".join(f"{cell.group}:{cell.id}" for cell in CELLS.values()),
        bases=" ".join(BASE_TASKS),
    log:
        str(LAYOUT.log("track_grid")),
    benchmark:
        str(LAYOUT.benchmark("track_grid"))
    conda:
        "../../envs/klrl.yaml"
    shell:
        """
        python -m klrl track-grid \
            --experiment {params.experiment} \
            {params.tracking} \
            --cells {params.cells} \
            --bases {params.bases} \
            --out {output} \
            > {log} 2>&1
        """
