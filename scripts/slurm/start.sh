#!/usr/bin/env bash
# Start a real SLURM cluster on this host for tests: munged, MariaDB + slurmdbd, slurmctld and one
# `slurmd -N NODE` per fake-GPU node (Debian's build has MULTIPLE_SLURMD), all on 127.0.0.1 or unix
# sockets under one state folder. GPUs are fake character devices (clones of /dev/null).
#
#   bash scripts/slurm/start.sh [--state DIR] [--nodes 16] [--gpus 8] [--leaves 2] [--shards 0] [--fresh]
#
# --shards S: GRES sharding (SLURM >= 22.05): every GPU also offers S gres/shard (Gres=...,shard:G*S,
# gres.conf Name=shard Count=G*S, gres/shard in AccountingStorageTRES); 0 (default) = no shards.
#
# Ready means: `scontrol ping` answers, `sinfo` shows every node idle and slurmctld is registered
# with slurmdbd (`sacctmgr -n list cluster`), all found by polling. Then it writes
#   $STATE/env.sh   (source it: SLURM_CONF, GPUTWIN_SLURM_STATE, GPUTWIN_SLURM_VERSION and, with
#                    slurmrestd installed, GPUTWIN_SLURMRESTD=unix:$STATE/run/restd.sock)
#   $STATE/pids     (one line per daemon: name, pid, executable; read by stop.sh)
# Files gputwin manages later exist from the start and are never overwritten here once present:
#   etc/gputwin-partitions.conf, etc/gputwin-scheduling.conf (both `Include`d by slurm.conf),
#   etc/topology.conf, etc/job_submit.lua. slurm.conf itself is the site base, regenerated each start.
# Starting on a folder that already holds a running cluster only reports it. Changing the node or
# GPU count of an existing state needs --fresh (slurmctld state and the job database go together).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODES=16
GPUS=8
LEAVES=2
SHARDS=0
FRESH=0
GPU_TYPE=h100

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

in_range() {  # in_range VALUE MIN MAX: a plain decimal number within bounds
  [[ "$1" =~ ^[0-9]{1,4}$ ]] || return 1
  ((10#$1 >= $2 && 10#$1 <= $3))
}

parse_args() {
  local state; state="$(default_state_dir)"
  while (($#)); do
    case "$1" in
      --state) state="${2:?--state needs a folder}"; shift 2 ;;
      --nodes) NODES="${2:?}"; shift 2 ;;
      --gpus) GPUS="${2:?}"; shift 2 ;;
      --leaves) LEAVES="${2:?}"; shift 2 ;;
      --shards) SHARDS="${2:?}"; shift 2 ;;
      --fresh) FRESH=1; shift ;;
      -h|--help) usage ;;
      *) log "unknown argument: $1"; usage ;;
    esac
  done
  in_range "$NODES" 1 512 || die "--nodes must be 1..512"
  in_range "$GPUS" 1 16 || die "--gpus must be 1..16"
  in_range "$LEAVES" 1 "$NODES" || die "--leaves must be 1..nodes"
  in_range "$SHARDS" 0 1000 || die "--shards must be 0..1000 (shards per GPU)"
  NODES=$((10#$NODES)) GPUS=$((10#$GPUS)) LEAVES=$((10#$LEAVES)) SHARDS=$((10#$SHARDS))  # "08" is not octal here
  mkdir -p "$state"
  state_paths "$(cd "$state" && pwd)"
}

# ---- names and ports ---------------------------------------------------------------------------

node_width() { if ((NODES > 99)); then echo 3; else echo 2; fi; }
node_name() { printf 'gpu%0*d\n' "$(node_width)" "$1"; }
# node_range FIRST LAST: the hostlist `gpu[01-08]` (or `gpu05` for one node).
node_range() {
  local w; w="$(node_width)"
  if (($1 == $2)); then printf 'gpu%0*d\n' "$w" "$1"; else printf 'gpu[%0*d-%0*d]\n' "$w" "$1" "$w" "$2"; fi
}

# free_port_block COUNT: the first of COUNT consecutive TCP ports free on 127.0.0.1 (slurmd's
# `Port=[a-b]` needs a consecutive block). A random start keeps parallel state folders apart.
free_port_block() {
  python3 - "$1" <<'EOF'
import random, socket, sys
count = int(sys.argv[1])
rng = random.Random()
for _ in range(200):
    base = rng.randrange(20000, 60000 - count)
    socks = []
    try:
        for port in range(base, base + count):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(base)
    sys.exit(0)
sys.exit("no free port block")
EOF
}

# ---- state folder ------------------------------------------------------------------------------

check_traversable() {
  # munged runs as user munge and mariadbd as mysql: every ancestor must let them through.
  # shellcheck disable=SC2153  # STATE is set by state_paths (lib.sh)
  local dir="$STATE"
  while [[ "$dir" != "/" ]]; do
    local mode; mode="$(stat -c %a "$dir")"
    (((8#$mode & 1) == 1)) || die "$dir is not traversable by other users (munge, mysql need o+x); use another --state"
    dir="$(dirname "$dir")"
  done
}

prepare_state() {
  if ((FRESH)) && [[ -e "$STATE/$STATE_MARKER" ]]; then
    log "--fresh: wiping $STATE"
    find "$STATE" -mindepth 1 -delete
  fi
  if [[ -n "$(ls -A "$STATE")" && ! -e "$STATE/$STATE_MARKER" ]]; then
    die "$STATE is not empty and not a gputwin SLURM state folder; use an empty or new folder"
  fi
  touch "$STATE/$STATE_MARKER"
  chmod 755 "$STATE"
  check_traversable
  local layout="nodes=$NODES gpus=$GPUS"
  ((SHARDS == 0)) || layout+=" shards=$SHARDS"  # node GRES live in slurmctld's state too
  if [[ -e "$LAYOUT_FILE" && "$(cat "$LAYOUT_FILE")" != "$layout" ]]; then
    die "$STATE holds a cluster with $(cat "$LAYOUT_FILE"); node or GPU changes need --fresh (state and DB go together)"
  fi
  echo "$layout" >"$LAYOUT_FILE"
  mkdir -p "$ETC" "$RUN" "$LOGS" "$RUN/fakedev" "$RUN/slurmctld"
  install -d -m 755 -o munge -g munge "$STATE/munge"
  install -d -m 755 -o mysql -g mysql "$RUN/mysql"
  : >"$PIDS_FILE"
}

make_fake_gpus() {
  # gres.conf File= must name character devices (count-only or regular files leave nodes INVAL);
  # clones of /dev/null that nothing ever opens, shared by every fake node.
  local i
  for ((i = 0; i < GPUS; i++)); do
    [[ -c "$RUN/fakedev/nvidia$i" ]] || mknod -m 666 "$RUN/fakedev/nvidia$i" c 1 3
  done
}

make_munge_key() {
  local key="$STATE/munge/munge.key"
  [[ -s "$key" ]] && return 0
  head -c 1024 /dev/urandom >"$key"
  chown munge:munge "$key"
  chmod 400 "$key"
}

db_password() {
  local file="$STATE/db.pass"
  [[ -s "$file" ]] || { (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$file"); }
  cat "$file"
}

# ---- configuration -----------------------------------------------------------------------------

write_slurm_conf() {
  local host="$1" last; last=$((NODES))
  local types=gpu gres="gpu:$GPU_TYPE:$GPUS" tres="gres/gpu,gres/gpu:$GPU_TYPE"
  if ((SHARDS)); then types+=",shard" gres+=",shard:$((GPUS * SHARDS))" tres+=",gres/shard"; fi
  cat >"$ETC/slurm.conf" <<EOF
# gputwin SLURM test cluster: site base configuration, written by scripts/slurm/start.sh on every
# start (SLURM $SLURM_VERSION). gputwin never edits this file. It manages the two files Included
# at the end, topology.conf and job_submit.lua (all next to this file). See docs/slurm-test-cluster.md.
ClusterName=$CLUSTER_NAME
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$STATE/munge/munge.socket
StateSaveLocation=$RUN/slurmctld
SlurmdSpoolDir=$RUN/slurmd-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
# No cgroups in a container: plain process tracking, no task binding, no accounting gatherer.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
# Fake nodes advertise more CPUs and memory than this host has.
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=4000
GresTypes=$types
PriorityType=priority/multifactor
# Fair-share usage and factors are recomputed every PriorityCalcPeriod (minutes; SLURM's default 5):
# 1, its minimum, so tests/slurm/test_slurm_fairshare_live.py sees usage within a minute.
PriorityCalcPeriod=1
JobRequeue=1
TopologyPlugin=topology/tree
JobSubmitPlugins=lua
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# slurmdbd connections take the munge socket from here, not from AuthInfo.
AccountingStoragePass=$STATE/munge/munge.socket
# Without gres/gpu here AllocTRES carries no GPU count, and sacct history would see none (nor shards
# without gres/shard).
AccountingStorageTRES=$tres
# Enforce accounts and QOS limits (gputwin slurm apply renders tenants as accounts + QOS GrpTRES):
# a restart-only setting (reconfigure shows a new value but slurmctld keeps enforcing the old one).
AccountingStorageEnforce=associations,limits,qos
JobCompType=jobcomp/none
MailProg=/bin/true
# A no-op node epilog, as production sites have one (cleanup, health checks): with an Epilog, slurmd
# always answers a job's end with MESSAGE_EPILOG_COMPLETE, on which slurmctld runs its scheduler at
# once. Without one, slurmd takes a shortcut when the batch step has already exited
# (ESLURMD_KILL_JOB_ALREADY_COMPLETE), and slurmctld then only queues a pass for its ~1 s
# background loop or the next backfill cycle: the start after an end made room came 0.0 or up to
# ~1 s later depending on that race (docs/slurm-test-cluster.md, "Start latency after an end").
Epilog=/bin/true
# Short timeouts: a test cluster should notice and recover within seconds.
MinJobAge=30
KillWait=5
InactiveLimit=0
Waittime=0
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=10
TCPTimeout=5
NodeName=DEFAULT CPUs=64 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=$gres State=UNKNOWN
NodeName=$(node_range 1 "$last") NodeHostname=$host NodeAddr=127.0.0.1 Port=[$SLURMD_PORT-$((SLURMD_PORT + NODES - 1))]
# Managed by gputwin (gputwin slurm apply): scheduling/priority/preemption, then partitions.
Include $ETC/gputwin-scheduling.conf
Include $ETC/gputwin-partitions.conf
EOF
}

write_gres_conf() {
  cat >"$ETC/gres.conf" <<EOF
# Fake GPUs: character devices cloned from /dev/null (scripts/slurm/start.sh). No autodetection.
AutoDetect=off
NodeName=$(node_range 1 "$NODES") Name=gpu Type=$GPU_TYPE File=$RUN/fakedev/nvidia[0-$((GPUS - 1))]
EOF
  # Shards: Name and Count only, which SLURM spreads evenly over each node's GPUs (gres.html).
  if ((SHARDS)); then
    echo "NodeName=$(node_range 1 "$NODES") Name=shard Count=$((GPUS * SHARDS))" >>"$ETC/gres.conf"
  fi
}

# write_if_absent FILE: stdin becomes FILE unless it exists (gputwin may have rewritten it since).
write_if_absent() {
  if [[ -e "$1" ]]; then cat >/dev/null; else cat >"$1"; fi
}

write_managed_files() {
  local half=$(((NODES + 1) / 2)) i first last
  write_if_absent "$ETC/gputwin-scheduling.conf" <<EOF
# Managed by gputwin: scheduling, priority and preemption settings (rewritten by gputwin slurm apply).
# Initial content from scripts/slurm/start.sh: no preemption; jobs start on the event that frees
# room (SLURM's default holds batch jobs up to 3 s after submission; backfill runs every 30 s).
PreemptType=preempt/none
PreemptMode=OFF
SchedulerParameters=batch_sched_delay=0,bf_interval=1
EOF
  write_if_absent "$ETC/gputwin-partitions.conf" <<EOF
# Managed by gputwin: partition definitions (rewritten by gputwin slurm apply).
# Initial content from scripts/slurm/start.sh.
PartitionName=batch Nodes=$(node_range 1 "$NODES") Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=debug Nodes=$(node_range "$((half + 1 > NODES ? NODES : half + 1))" "$NODES") MaxTime=00:30:00 State=UP PriorityTier=1
EOF
  {
    echo "# Managed by gputwin: the switch tree (rewritten by gputwin slurm apply)."
    echo "# Initial content from scripts/slurm/start.sh: $LEAVES leaf switch(es) under one spine."
    # Leaf i gets nodes floor((i-1)N/L)+1 .. floor(iN/L): as even as possible, none empty (L <= N).
    for ((i = 1; i <= LEAVES; i++)); do
      first=$(((i - 1) * NODES / LEAVES + 1)); last=$((i * NODES / LEAVES))
      echo "SwitchName=leaf$i Nodes=$(node_range "$first" "$last")"
    done
    if ((LEAVES == 1)); then echo "SwitchName=spine Switches=leaf1"; else echo "SwitchName=spine Switches=leaf[1-$LEAVES]"; fi
  } | write_if_absent "$ETC/topology.conf"
  write_if_absent "$ETC/job_submit.lua" <<'EOF'
-- Managed by gputwin: job routing and sizing (rewritten by `gputwin slurm apply`).
-- Initial content from scripts/slurm/start.sh: accept every job unchanged.
function slurm_job_submit(job_desc, part_list, submit_uid)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
EOF
}

write_slurmdbd_conf() {
  local host="$1" pass; pass="$(db_password)"
  (umask 077; cat >"$ETC/slurmdbd.conf" <<EOF
# gputwin SLURM test cluster: accounting daemon (scripts/slurm/start.sh, regenerated each start).
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
DbdAddr=127.0.0.1
DbdHost=$host
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$RUN/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
  )
}

write_env() {
  cat >"$ENV_FILE" <<EOF
# Source this to talk to the gputwin SLURM test cluster in $STATE.
export SLURM_CONF=$ETC/slurm.conf
export GPUTWIN_SLURM_STATE=$STATE
export GPUTWIN_SLURM_VERSION=$SLURM_VERSION
EOF
}

# ---- daemons -----------------------------------------------------------------------------------

# spawn NAME EXE ARGS...: start a foreground daemon in its own session (so it outlives this script
# and a caller's process-group signals), stdio on files so no caller waits on an inherited pipe.
# The recorded executable lets stop.sh tell our process from a reused PID.
spawn() {
  local name="$1" exe="$2"; shift 2
  setsid "$@" </dev/null >>"$LOGS/$name.out" 2>&1 &
  printf '%s %s %s\n' "$name" "$!" "$(readlink -f "$exe")" >>"$PIDS_FILE"
}

pid_of() { awk -v n="$1" '$1 == n { print $2 }' "$PIDS_FILE"; }

# expect_alive NAME: fail fast with the daemon's log when it has already exited.
expect_alive() {
  local pid; pid="$(pid_of "$1")"
  alive "$pid" && return 0
  log "$1 exited; last lines of its logs:"
  tail -n 20 "$LOGS/$1"* "$STATE/munge/$1.log" >&2 2>/dev/null || true
  return 1
}

# ready NAME SECONDS CMD...: poll CMD while the daemon NAME still runs.
ready() {
  local name="$1" limit="$2"; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    expect_alive "$name" || return 1
    ((SECONDS < deadline)) || { log "$name not ready after ${limit}s"; tail -n 20 "$LOGS/$name"* >&2 || true; return 1; }
    sleep 0.2
  done
}

munge_ok() { munge -n -S "$STATE/munge/munge.socket" | unmunge -S "$STATE/munge/munge.socket"; }

start_munged() {
  local munged; munged="$(command -v munged)"
  spawn munged "$munged" setpriv --reuid=munge --regid=munge --clear-groups "$munged" --foreground \
    --socket="$STATE/munge/munge.socket" --key-file="$STATE/munge/munge.key" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" \
    --seed-file="$STATE/munge/munged.seed"
  ready munged 20 munge_ok
}

sql() { mariadb --no-defaults --socket="$RUN/mysql/mysqld.sock" -u root -N -e "$1"; }

start_mariadb() {
  if [[ ! -d "$RUN/mysql/data/mysql" ]]; then
    mariadb-install-db --no-defaults --user=mysql --datadir="$RUN/mysql/data" --skip-test-db \
      --auth-root-authentication-method=socket >"$LOGS/mariadb-install.log" 2>&1 \
      || { tail -n 20 "$LOGS/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
  fi
  local exe; exe="$(command -v mariadbd)"
  # 512M buffer pool: slurmdbd warns below it; InnoDB allocates it lazily.
  spawn mariadbd "$exe" "$exe" --no-defaults --user=mysql --datadir="$RUN/mysql/data" \
    --bind-address=127.0.0.1 --port="$DB_PORT" --socket="$RUN/mysql/mysqld.sock" \
    --pid-file="$RUN/mysql/mysqld.pid" --log-error="$LOGS/mariadbd.log" \
    --innodb-buffer-pool-size=512M --performance-schema=OFF
  ready mariadbd 60 sql "SELECT 1"
  local pass; pass="$(db_password)"
  sql "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
       CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
       CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
       GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
       GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
}

# sacctmgr_has ENTITY CONDITIONS...: the accounting database already holds such a record.
sacctmgr_has() { [[ -n "$(sacctmgr -n -P list "$@" 2>/dev/null)" ]]; }

start_slurmdbd() {
  local exe; exe="$(command -v slurmdbd)"
  spawn slurmdbd "$exe" "$exe" -D
  ready slurmdbd 90 sacctmgr -n list cluster
  sacctmgr_has cluster "$CLUSTER_NAME" format=cluster || sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null
  local account
  for account in ml infra; do
    sacctmgr_has account "$account" format=account \
      || sacctmgr -i add account "$account" Cluster="$CLUSTER_NAME" Description="$account" Organization=gputwin >/dev/null
  done
  sacctmgr_has assoc user=root account=infra format=user || sacctmgr -i add user root Account=ml,infra >/dev/null
}

# Here-strings, not pipes into grep -q: an early grep exit would fail the pipe (pipefail, SIGPIPE).
ctld_up() { grep -q 'is UP' <<<"$(scontrol ping)"; }

start_slurmctld() {
  local exe; exe="$(command -v slurmctld)"
  spawn slurmctld "$exe" "$exe" -D -i
  ready slurmctld 60 ctld_up
  grep -Eq '^MULTIPLE_SLURMD +=.*Yes' <<<"$(scontrol show config)" \
    || die "this SLURM build lacks MULTIPLE_SLURMD: one slurmd per fake node cannot run on one host"
}

# all_idle: every configured node is idle (sinfo prints a node once per partition, hence sort -u).
all_idle() {
  local idle
  idle="$(sinfo -h -N -o '%N %t' | sort -u | awk '$2 == "idle"' | wc -l)"
  ((idle == NODES))
}

# ctld_registered: slurmdbd knows slurmctld's port, so finished jobs reach the accounting database.
ctld_registered() {
  grep -qx "$CTLD_PORT" <<<"$(sacctmgr -n -P list cluster "$CLUSTER_NAME" format=controlport)"
}

start_slurmds() {
  local exe i; exe="$(command -v slurmd)"
  for ((i = 1; i <= NODES; i++)); do
    spawn "slurmd-$(node_name "$i")" "$exe" "$exe" -D -N "$(node_name "$i")"
  done
  ready slurmctld 120 all_idle || { sinfo -N >&2 || true; return 1; }
  ready slurmctld 60 ctld_registered
}

# slurmrestd on a unix socket, when installed: rest_auth/local authenticates callers by the
# socket's peer uid (root here, hence disable_user_check); TZ=UTC so it reads times like sacct
# does here. env.sh then names the socket in GPUTWIN_SLURMRESTD (the REST history transport).
start_slurmrestd() {
  local exe sock="$RUN/restd.sock"
  exe="$(command -v slurmrestd)" || { log "slurmrestd not installed: no REST transport"; return 0; }
  rm -f "$sock"
  spawn slurmrestd "$exe" env SLURMRESTD_SECURITY=disable_user_check TZ=UTC "$exe" -a rest_auth/local "unix:$sock"
  ready slurmrestd 30 test -S "$sock"
  echo "export GPUTWIN_SLURMRESTD=unix:$sock" >>"$ENV_FILE"
}

# ---- main --------------------------------------------------------------------------------------

already_running() {
  [[ -s "$PIDS_FILE" ]] || return 1
  local name pid exe
  while read -r name pid exe; do
    pid_is_ours "$pid" "$exe" || return 1
  done <"$PIDS_FILE"
}

# on_exit: any exit before readiness (die, a failed command) stops whatever was already started.
on_exit() {
  local rc=$?
  ((STARTED_OK)) && return 0
  [[ -s "${PIDS_FILE:-/nonexistent}" ]] || return 0
  log "start failed; stopping what was started (logs stay in $LOGS)"
  bash "$SLURM_SCRIPTS_DIR/stop.sh" --state "$STATE" >&2 || true
  return "$rc"
}

main() {
  parse_args "$@"
  [[ "$(id -u)" == 0 ]] || die "start.sh runs the daemons as root (SlurmUser=root); run it as root"
  detect_slurm
  if already_running; then
    log "already running in $STATE (source $ENV_FILE)"
    return 0
  fi
  [[ -s "$PIDS_FILE" ]] && bash "$SLURM_SCRIPTS_DIR/stop.sh" --state "$STATE" >/dev/null 2>&1
  local t0=$SECONDS host base
  host="$(hostname -s)"
  prepare_state
  base="$(free_port_block $((NODES + 3)))" || die "no free block of $((NODES + 3)) ports on 127.0.0.1"
  CTLD_PORT=$base; DBD_PORT=$((base + 1)); DB_PORT=$((base + 2)); SLURMD_PORT=$((base + 3))
  make_fake_gpus
  make_munge_key
  write_slurm_conf "$host"
  write_gres_conf
  write_managed_files
  write_slurmdbd_conf "$host"
  write_env
  export SLURM_CONF="$ETC/slurm.conf"
  STARTED_OK=0
  trap on_exit EXIT
  start_munged
  start_mariadb
  start_slurmdbd
  start_slurmctld
  start_slurmds
  start_slurmrestd
  STARTED_OK=1
  log "ready in $((SECONDS - t0)) s: SLURM $SLURM_VERSION, $NODES nodes x $GPUS GPUs ($SHARDS shards each), $LEAVES leaves; source $ENV_FILE"
}

main "$@"
