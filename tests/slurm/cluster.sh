#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for tests/test_slurm.py.
#
#   tests/slurm/cluster.sh start STATE   install what is missing (as root, with apt), write the
#                                        configs under STATE, start munged, mariadbd, slurmdbd,
#                                        slurmctld and slurmd on 127.0.0.1, wait for the node to be idle
#   tests/slurm/cluster.sh stop STATE    cancel every job, stop the daemons `start` recorded, by PID
#
# Clients reach the cluster with SLURM_CONF=STATE/slurm.conf, and on the node (inside jobs)
# through /run/slurm/conf, which slurmd links to the config it fetched from slurmctld. The node has this machine's CPUs
# and memory (`slurmd -C`); partitions `cpu` (default) and `gpu` both hold it, with no GPUs (no
# GRES), so a job asking for a GPU is refused by sbatch. Accounting goes to MariaDB through
# slurmdbd (the SLURM executor plugin asks `sacct` for job states and `sacctmgr` for accounts);
# account `klrl` holds user root. Exit status 77: this machine cannot run the cluster (not root,
# or SLURM missing and no apt-get); the reason is on stderr.
set -euo pipefail

ACTION=${1:?usage: cluster.sh start|stop STATE}
STATE=$(realpath -m "${2:?usage: cluster.sh start|stop STATE}")
PIDS=$STATE/pids               # "<name> <pid>" per daemon, in start order
export SLURM_CONF=$STATE/slurm.conf
NODE=$(hostname -s)
MUNGE_SOCKET=/run/munge/munge.socket.2
PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)
BINARIES=(slurmctld slurmd slurmdbd sbatch sacct sacctmgr munged mariadbd mariadb-install-db)

log() { echo "cluster.sh: $*" >&2; }

missing() {
    local binary
    for binary in "${BINARIES[@]}"; do
        command -v "$binary" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$binary" >/dev/null 2>&1 || return 0
    done
    return 1
}

install() {
    if [ "$(id -u)" != 0 ]; then
        log "not root: the test cluster needs root (its daemons run as root)"; exit 77
    fi
    if missing; then
        if ! command -v apt-get >/dev/null 2>&1; then
            log "SLURM, munge or MariaDB is missing and apt-get is not available to install them"; exit 77
        fi
        log "installing ${PACKAGES[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${PACKAGES[@]}" >/dev/null
    fi
    export PATH=$PATH:/usr/sbin:/sbin
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Run a daemon in the foreground of its own session, in the background of this script, and
# record its PID (the daemon's own: setsid execs it, this shell is not a group leader).
launch() {
    local name=$1; shift
    setsid "$@" </dev/null >"$STATE/$name.out" 2>&1 &
    echo "$name $!" >>"$PIDS"
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds=$1 what=$2; shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        if [ $SECONDS -ge $deadline ]; then
            log "$what did not come up within $seconds s"; return 1
        fi
        sleep 0.5
    done
}

write_configs() {
    local ctld_port dbd_port db_port slurmd_port hardware
    ctld_port=$(free_port); dbd_port=$(free_port); db_port=$(free_port); slurmd_port=$(free_port)
    echo "$db_port" >"$STATE/db_port"
    echo "$ctld_port" >"$STATE/ctld_port"
    hardware=$(slurmd -C | head -1 | sed -E 's/^NodeName=[^ ]+ //')
    mkdir -p "$STATE/ctld" "$STATE/spool" "$STATE/mysql"
    cat >"$SLURM_CONF" <<EOF
ClusterName=klrl
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pidfile
SlurmdPidFile=$STATE/slurmd.pidfile
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
AccountingStoreFlags=job_comment
SlurmctldParameters=enable_configless
ReturnToService=2
MinJobAge=300
KillWait=5
OverTimeLimit=0
InactiveLimit=0
NodeName=$NODE NodeAddr=127.0.0.1 $hardware State=UNKNOWN
PartitionName=cpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$NODE MaxTime=INFINITE State=UP
EOF
    cat >"$STATE/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=$NODE
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
PidFile=$STATE/slurmdbd.pidfile
LogFile=$STATE/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$STATE/slurmdbd.conf"
}

start() {
    install
    mkdir -p "$STATE"
    : >"$PIDS"
    trap 'log "start failed; stopping what was started (logs in $STATE)"; stop' EXIT
    write_configs
    local sql="mariadb --no-defaults --socket=$STATE/mysql.socket -u root"

    # munge's default socket: SLURM 22.05's clients do not all follow AuthInfo=socket=... .
    if ! munge -n >/dev/null 2>&1; then
        mkdir -p "$(dirname "$MUNGE_SOCKET")"
        launch munged munged -F --force --socket="$MUNGE_SOCKET" --key-file=/etc/munge/munge.key \
            --pid-file="$STATE/munged.pidfile" --log-file="$STATE/munged.log" --seed-file="$STATE/munge.seed"
        wait_for 30 munged munge -n
    fi

    mariadb-install-db --no-defaults --user=root --datadir="$STATE/mysql" --auth-root-authentication-method=normal \
        >"$STATE/mariadb-install.out" 2>&1
    launch mariadbd mariadbd --no-defaults --user=root --datadir="$STATE/mysql" --socket="$STATE/mysql.socket" \
        --bind-address=127.0.0.1 --port="$(cat "$STATE/db_port")" --pid-file="$STATE/mariadbd.pidfile" \
        --log-error="$STATE/mariadbd.log" --skip-name-resolve
    wait_for 60 mariadbd $sql -e "SELECT 1"
    $sql -e "CREATE DATABASE slurm_acct_db; CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
             GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"

    launch slurmdbd slurmdbd -D
    wait_for 60 slurmdbd sacctmgr -n list cluster
    sacctmgr -i add cluster klrl >/dev/null
    sacctmgr -i add account klrl description=klrl-tests organization=klrl >/dev/null
    sacctmgr -i add user root account=klrl >/dev/null

    launch slurmctld slurmctld -D -i
    wait_for 60 slurmctld scontrol ping
    # Configless, as on many real clusters: slurmd fetches the config from slurmctld and links it
    # at /run/slurm/conf, where srun finds it inside a job (the SLURM executor's job step drops
    # SLURM_CONF, with every SLURM_ variable, from srun's environment).
    launch slurmd env -u SLURM_CONF slurmd -D -N "$NODE" --conf-server "127.0.0.1:$(cat "$STATE/ctld_port")"
    wait_for 90 "node $NODE (idle)" bash -c "[ \"\$(sinfo -h -n $NODE -p cpu -o %t)\" = idle ]"
    trap - EXIT
    log "cluster up: SLURM_CONF=$SLURM_CONF"
}

stop() {
    [ -f "$PIDS" ] || return 0
    if command -v scancel >/dev/null 2>&1 && grep -q '^slurmctld ' "$PIDS"; then
        scancel --full --cluster klrl --user root >/dev/null 2>&1 || true
        local deadline=$((SECONDS + 20))
        while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
    fi
    local name pid deadline
    tac "$PIDS" | while read -r name pid; do
        kill -TERM "$pid" 2>/dev/null || continue
        deadline=$((SECONDS + 20))
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name ($pid) outlived SIGTERM; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    rm -f "$PIDS"
    if [[ "$(readlink /run/slurm/conf 2>/dev/null)" == "$STATE"/* ]]; then rm -f /run/slurm/conf; fi
}

case $ACTION in
    start) start ;;
    stop) export PATH=$PATH:/usr/sbin:/sbin; stop ;;
    *) log "unknown action $ACTION (start or stop)"; exit 2 ;;
esac
