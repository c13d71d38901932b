#!/usr/bin/env bash
# Stop the control plane that scripts/k8s/start.sh started: exactly the processes recorded in
# STATE/pids (checked against the recorded executable, so a reused PID is never signalled), TERM first,
# KILL after a bounded wait. Removes STATE/pids and nothing else (logs and data stay for inspection).
#
# Usage: scripts/k8s/stop.sh [--state DIR] [--wait SECONDS]
#   --state DIR     the dir given to start.sh (default ${GPUTWIN_K8S_STATE:-${TMPDIR:-/tmp}/gputwin-k8s})
#   --wait SECONDS  how long to wait after TERM before KILL (default 15)
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

main() {
  local state="" wait_s=15
  while (($#)); do
    case "$1" in
      --state) state="$2"; shift ;;
      --wait) wait_s="$2"; shift ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) die "unknown argument: $1" ;;
    esac
    shift
  done
  state="${state:-$(default_state_dir)}"
  stop_recorded "$state" "$wait_s"
}

main "$@"
