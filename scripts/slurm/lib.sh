# shellcheck shell=bash disable=SC2034  # the settings here are used by the scripts that source it
# Shared settings and helpers for scripts/slurm/*.sh (sourced, not run).
# See docs/slurm-test-cluster.md for the layout of a state folder and why each setting is there.

SLURM_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Debian's packages: the real daemons, accounting and its database. Never the *-emulator packages:
# their postinst silently replaces slurmctld/slurmd with a front-end build that cannot start.
# lua5.1: luac5.1 checks job_submit.lua syntax (SLURM's Lua plugin links liblua5.1).
# slurmrestd: the REST history transport (start.sh runs it on a unix socket when installed).
SLURM_PACKAGES=(slurm-wlm slurmdbd slurm-client munge mariadb-server lua5.1 slurmrestd)
SLURM_COMMANDS=(slurmctld slurmd slurmdbd sacct sacctmgr scontrol sinfo sbatch munged mariadbd mariadb-install-db slurmrestd)

STATE_MARKER=.gputwin-slurm-state   # start.sh only ever wipes a folder that carries this marker
CLUSTER_NAME=gputwin

log() { printf '[slurm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

default_state_dir() { printf '%s\n' "${GPUTWIN_SLURM_STATE:-/tmp/gputwin-slurm}"; }

# slurm_version: "22.05.8" from `slurmd -V` ("slurm-wlm 22.05.8"); the clients need a
# configuration even for --version, the daemons do not.
slurm_version() {
  local out
  out="$(slurmd -V 2>/dev/null)" || return 1
  [[ "$out" =~ ([0-9]+)\.([0-9]+)\.([0-9]+) ]] || return 1
  printf '%s\n' "${BASH_REMATCH[0]}"
}

# detect_slurm: set SLURM_VERSION ("22.05.8") and SLURM_SERIES ("22.05" or "24.11"), or die.
# A function that sets globals, not one that prints: `die` inside $(...) would only end a subshell.
detect_slurm() {
  SLURM_VERSION="$(slurm_version)" || die "SLURM is not installed (no slurmd): run scripts/slurm/install.sh"
  case "$SLURM_VERSION" in
    22.05.*) SLURM_SERIES=22.05 ;;
    24.11.*) SLURM_SERIES=24.11 ;;
    *) die "SLURM $SLURM_VERSION found; these scripts support 22.05 (Debian 12) and 24.11 (Debian 13)" ;;
  esac
}

# alive PID: the process exists and is not a zombie. Where PID 1 reaps late a stopped daemon
# lingers as a zombie and `kill -0` still succeeds, so the state letter decides.
alive() {
  local pid="$1" stat
  stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat:0:1}" != "Z" ]]
}

# pid_is_ours PID EXE: alive and still running the recorded executable (guards against PID reuse).
pid_is_ours() {
  local pid="$1" exe="$2" actual
  alive "$pid" || return 1
  actual="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  [[ "${actual% (deleted)}" == "$exe" ]]
}

# state_paths STATE: set the path variables every script uses for one state folder.
state_paths() {
  STATE="$1"
  ETC="$STATE/etc"
  RUN="$STATE/run"
  LOGS="$STATE/log"
  PIDS_FILE="$STATE/pids"
  ENV_FILE="$STATE/env.sh"
  LAYOUT_FILE="$STATE/layout"
}
