#!/usr/bin/env bash
# Stop the SLURM test cluster that scripts/slurm/start.sh started in a state folder, and nothing
# else: only the PIDs in $STATE/pids (checked against their recorded executable, so a reused PID
# is never hit) and the job processes of THIS cluster (slurmstepd and job tasks whose environment
# carries this cluster's SLURM_CONF, since stopping slurmd does not end them).
#
#   bash scripts/slurm/stop.sh [--state DIR]
#
# Order: cancel all jobs while slurmctld still answers, then slurmd x N, slurmctld, slurmdbd,
# mariadbd, munged; each gets SIGTERM, then SIGKILL after a bounded wait. The state folder (config,
# database, logs) is kept, so start.sh can bring the same cluster back.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

parse_args() {
  local state; state="$(default_state_dir)"
  while (($#)); do
    case "$1" in
      --state) state="${2:?--state needs a folder}"; shift 2 ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
      *) die "unknown argument: $1" ;;
    esac
  done
  [[ -d "$state" ]] || { log "no state folder $state: nothing to stop"; exit 0; }
  state_paths "$(cd "$state" && pwd)"
  # shellcheck disable=SC2153  # STATE is set by state_paths (lib.sh)
  [[ -e "$STATE/$STATE_MARKER" ]] || die "$STATE is not a gputwin SLURM state folder"
}

# pids_of PATTERN: recorded PIDs whose name matches the glob PATTERN and that are still ours.
pids_of() {
  local name pid exe
  [[ -s "$PIDS_FILE" ]] || return 0
  while read -r name pid exe; do
    # shellcheck disable=SC2053  # the pattern is a glob on purpose
    if [[ "$name" == $1 ]] && pid_is_ours "$pid" "$exe"; then echo "$pid"; fi
  done <"$PIDS_FILE"
}

# terminate WAIT PID...: SIGTERM, poll up to WAIT seconds, SIGKILL what is left, poll 5 s more.
terminate() {
  local wait="$1"; shift
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  any_alive() { local p; for p in "$@"; do alive "$p" && return 0; done; return 1; }
  local deadline=$((SECONDS + wait))
  while any_alive "$@" && ((SECONDS < deadline)); do sleep 0.2; done
  if any_alive "$@"; then
    log "still running after ${wait}s, sending SIGKILL: $*"
    kill -KILL "$@" 2>/dev/null || true
    deadline=$((SECONDS + 5))
    while any_alive "$@" && ((SECONDS < deadline)); do sleep 0.2; done
  fi
}

stop_daemons() {  # stop_daemons WAIT NAME-GLOB
  local pids
  mapfile -t pids < <(pids_of "$2")
  ((${#pids[@]})) || return 0
  log "stopping $2 (${#pids[@]} process(es))"
  terminate "$1" "${pids[@]}"
}

cancel_jobs() {
  local ctld; ctld="$(pids_of slurmctld)"
  [[ -n "$ctld" ]] || return 0
  export SLURM_CONF="$ETC/slurm.conf"
  local jobs
  jobs="$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u)" || return 0
  [[ -n "$jobs" ]] || return 0
  log "cancelling $(wc -l <<<"$jobs") job(s)"
  # shellcheck disable=SC2086  # one job id per word
  timeout 10 scancel $jobs 2>/dev/null || true
  local deadline=$((SECONDS + 10))
  while [[ -n "$(timeout 5 squeue -h -o %A 2>/dev/null)" ]] && ((SECONDS < deadline)); do sleep 0.2; done
}

# job_leftovers: slurmstepd and job processes of this cluster. A job's environment carries the
# submitter's SLURM_CONF plus SLURM_JOB_ID; slurmstepd inherits slurmd's SLURM_CONF. The caller
# (a shell or pytest that sourced env.sh) has SLURM_CONF but no SLURM_JOB_ID, and is skipped.
job_leftovers() {
  local conf="SLURM_CONF=$ETC/slurm.conf" file pid
  # One grep over every environment (NUL-separated lines), not a subshell per process.
  while IFS= read -r -d '' file; do
    pid="${file#/proc/}"; pid="${pid%/environ}"
    ((pid == $$ || pid == PPID)) && continue
    if [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == slurmstepd ]] \
       || grep -qz '^SLURM_JOB_ID=' "$file" 2>/dev/null; then
      if alive "$pid"; then echo "$pid"; fi
    fi
  done < <(grep -lZzxF -- "$conf" /proc/[0-9]*/environ 2>/dev/null || true)
}

stop_job_leftovers() {
  local pids
  mapfile -t pids < <(job_leftovers)
  ((${#pids[@]})) || return 0
  log "ending ${#pids[@]} leftover job process(es)"
  terminate 5 "${pids[@]}"
}

main() {
  parse_args "$@"
  local t0=$SECONDS
  cancel_jobs
  stop_daemons 10 slurmrestd
  stop_daemons 10 'slurmd-*'   # first: a slurmd that lost slurmctld retries and ignores SIGTERM
  stop_daemons 10 slurmctld
  stop_job_leftovers
  stop_daemons 10 slurmdbd
  stop_daemons 30 mariadbd     # InnoDB flushes on a clean shutdown
  stop_daemons 10 munged
  : >"$PIDS_FILE"
  log "stopped in $((SECONDS - t0)) s (state kept in $STATE)"
}

main "$@"
