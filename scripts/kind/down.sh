#!/usr/bin/env bash
# Delete the kind cluster scripts/kind/up.sh made (and with it everything in it).
#
# Usage: scripts/kind/down.sh [--name NAME]   (default gputwin, as in kind-config.yaml)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

main() {
  local name=gputwin
  while (($#)); do
    case "$1" in
      --name) name="$2"; shift ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
  done
  need kind
  if cluster_exists "$name"; then
    kind delete cluster --name "$name"
  else
    log "no kind cluster named $name: nothing to do"
  fi
}

main "$@"
