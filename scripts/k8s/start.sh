#!/usr/bin/env bash
# Start a real Kubernetes control plane on 127.0.0.1 for tests: etcd, kube-apiserver and KWOK (which keeps
# fake Nodes annotated kwok.x-k8s.io/node=fake Ready and runs their Pods), plus kube-scheduler and/or
# kube-controller-manager on request. Binaries come from scripts/k8s/build.sh's cache.
#
# Every port is a free one picked at start; keys and the admin token are generated into the state dir
# (nothing secret is committed). Waits by polling /readyz and /healthz, never by fixed sleeps.
#
# Usage: scripts/k8s/start.sh [--state DIR] [--with-scheduler] [--with-controller-manager] [--no-kwok]
#                             [--timeout SECONDS]
#   --state DIR   where keys, etcd data, logs, kubeconfig, pids and env go
#                 (default ${GPUTWIN_K8S_STATE:-${TMPDIR:-/tmp}/gputwin-k8s}); a previous run's state there
#                 is cleared (only a dir that start.sh made itself, marked by .gputwin-k8s-state)
# On success prints one line on stdout, `export KUBECONFIG=DIR/kubeconfig`, so that
#   eval "$(scripts/k8s/start.sh)"
# works; DIR/env holds the ports and paths (sourceable). Stop with scripts/k8s/stop.sh --state DIR.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

STATE=""
WITH_SCHEDULER=0
WITH_KCM=0
WITH_KWOK=1
TIMEOUT=90

parse_args() {
  while (($#)); do
    case "$1" in
      --state) STATE="$2"; shift ;;
      --with-scheduler) WITH_SCHEDULER=1 ;;
      --with-controller-manager) WITH_KCM=1 ;;
      --no-kwok) WITH_KWOK=0 ;;
      --timeout) TIMEOUT="$2"; shift ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) die "unknown argument: $1" ;;
    esac
    shift
  done
  STATE="${STATE:-$(default_state_dir)}"
}

check_binaries() {
  BIN="$(k8s_bin_dir)"
  local name
  for name in etcd kube-apiserver kube-scheduler kube-controller-manager kwok; do
    [[ -x "$BIN/$name" ]] || die "$BIN/$name is missing: run scripts/k8s/build.sh first"
  done
  command -v openssl >/dev/null || die "openssl is needed to generate keys"
  command -v curl >/dev/null || die "curl is needed to poll /readyz"
}

# Fresh state dir: refuse a live control plane or a foreign non-empty dir; clear our own old state.
prepare_state() {
  mkdir -p "$STATE"
  STATE="$(cd "$STATE" && pwd)"
  if [[ -f "$STATE/pids" ]]; then
    local name pid exe
    while read -r name pid exe; do
      pid_is_ours "$pid" "$exe" && die "$name (pid $pid) from $STATE is still running: scripts/k8s/stop.sh --state $STATE"
    done <"$STATE/pids"
    rm -f "$STATE/pids"
  fi
  if [[ -f "$STATE/$STATE_MARKER" ]]; then
    rm -rf "$STATE/etcd" "$STATE/pki" "$STATE/logs" "$STATE/kubeconfig" "$STATE/env" "$STATE/kwok-stages.yaml"
  elif [[ -n "$(ls -A "$STATE")" ]]; then
    die "$STATE is not empty and was not made by start.sh: give an empty or new --state DIR"
  fi
  touch "$STATE/$STATE_MARKER"
  mkdir -p "$STATE/pki/serving" "$STATE/logs"
  chmod 700 "$STATE/pki"
}

# Free TCP ports on 127.0.0.1, all held open together so they are distinct.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

generate_credentials() {
  openssl genrsa -out "$STATE/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$STATE/pki/sa.key" -pubout -out "$STATE/pki/sa.pub" 2>/dev/null
  TOKEN="$(openssl rand -hex 32)"
  printf '%s,admin,admin-uid,system:masters\n' "$TOKEN" >"$STATE/pki/tokens.csv"
  chmod 600 "$STATE/pki/sa.key" "$STATE/pki/tokens.csv"
}

# launch NAME ARGS...: run $BIN/NAME in the background, log to logs/NAME.log, record "NAME PID EXE".
launch() {
  local name="$1"; shift
  nohup "$BIN/$name" "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null &
  local pid=$!
  printf '%s %s %s\n' "$name" "$pid" "$(readlink -f "$BIN/$name")" >>"$STATE/pids"
  PIDS[$name]=$pid
}

elapsed() {  # seconds since start, to 0.1 s
  awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

fail_with_log() {
  local name="$1"; shift
  log "$*"
  log "last lines of $STATE/logs/$name.log:"
  tail -n 25 "$STATE/logs/$name.log" >&2 || true
  exit 1
}

# wait_http NAME URL [curl args...]: poll until the body is "ok"; fail fast if NAME's process died.
wait_http() {
  local name="$1" url="$2"; shift 2
  local body
  while :; do
    body="$(curl -s --max-time 2 "$@" "$url" 2>/dev/null)" || body=""
    [[ "$body" == ok ]] && return 0
    kill -0 "${PIDS[$name]}" 2>/dev/null || fail_with_log "$name" "$name exited before $url answered ok"
    ((SECONDS < DEADLINE)) || fail_with_log "$name" "timed out after ${TIMEOUT}s waiting for $url"
    sleep 0.2
  done
}

start_etcd() {
  launch etcd --name gputwin --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "gputwin=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --log-level warn   # throwaway test data: no fsync
  # /health answers {"health":"true",…} once etcd serves.
  local body
  while :; do
    body="$(curl -s --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null)" || body=""
    [[ "$body" == *'"health":"true"'* ]] && break
    kill -0 "${PIDS[etcd]}" 2>/dev/null || fail_with_log etcd "etcd exited at start"
    ((SECONDS < DEADLINE)) || fail_with_log etcd "timed out waiting for etcd"
    sleep 0.2
  done
  log "etcd ready on 127.0.0.1:$ETCD_PORT ($(elapsed) s)"
}

start_apiserver() {
  # No --tls-cert-file: the apiserver writes a self-signed serving cert (SAN 127.0.0.1) into --cert-dir.
  # ServiceAccount admission is off (as in envtest): fake pods need no token, and pods created right
  # after their namespace would otherwise race the controller that creates sa/default.
  # --endpoint-reconciler-type=none: a loopback advertise address cannot be an Endpoints address.
  launch kube-apiserver \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --cert-dir="$STATE/pki/serving" \
    --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$STATE/pki/sa.pub" \
    --service-account-signing-key-file="$STATE/pki/sa.key" \
    --authorization-mode=RBAC --token-auth-file="$STATE/pki/tokens.csv" \
    --disable-admission-plugins=ServiceAccount \
    --endpoint-reconciler-type=none --profiling=false
  wait_http kube-apiserver "https://127.0.0.1:$APISERVER_PORT/readyz" -k -H "Authorization: Bearer $TOKEN"
  log "kube-apiserver ready on https://127.0.0.1:$APISERVER_PORT ($(elapsed) s)"
}

write_kubeconfig() {
  CA="$STATE/pki/serving/apiserver.crt"
  [[ -s "$CA" ]] || die "kube-apiserver did not write $CA"
  (umask 077; cat >"$STATE/kubeconfig") <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gputwin-test
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $CA
users:
- name: admin
  user:
    token: $TOKEN
contexts:
- name: gputwin-test
  context: {cluster: gputwin-test, user: admin}
current-context: gputwin-test
EOF
}

start_controller_manager() {
  launch kube-controller-manager --kubeconfig="$STATE/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
    --service-account-private-key-file="$STATE/pki/sa.key" --root-ca-file="$CA" \
    --use-service-account-credentials=false --controllers='*' --profiling=false
  wait_http kube-controller-manager "https://127.0.0.1:$KCM_PORT/healthz" -k
  log "kube-controller-manager ready ($(elapsed) s)"
}

start_scheduler() {
  launch kube-scheduler --kubeconfig="$STATE/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --profiling=false
  wait_http kube-scheduler "https://127.0.0.1:$SCHEDULER_PORT/healthz" -k
  log "kube-scheduler ready ($(elapsed) s)"
}

start_kwok() {
  # Standalone kwok reads its Stages only from --config: KWOK's own "fast" node/pod stages (copied from
  # the kwok module by build.sh) plus ours (kwok-stages-gputwin.yaml).
  cat "$BIN/kwok-stages.yaml" "$K8S_SCRIPTS_DIR/kwok-stages-gputwin.yaml" >"$STATE/kwok-stages.yaml"
  launch kwok --kubeconfig="$STATE/kubeconfig" --config="$STATE/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --server-address="127.0.0.1:$KWOK_PORT" --node-ip=127.0.0.1
  wait_http kwok "http://127.0.0.1:$KWOK_PORT/healthz"
  log "kwok ready ($(elapsed) s)"
}

write_env() {
  cat >"$STATE/env" <<EOF
# Written by scripts/k8s/start.sh; source it for the ports and paths of this control plane.
KUBECONFIG=$STATE/kubeconfig
K8S_BIN_DIR=$BIN
KUBECTL=$BIN/kubectl
APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
ETCD_URL=http://127.0.0.1:$ETCD_PORT
KWOK_URL=$( ((WITH_KWOK)) && printf 'http://127.0.0.1:%s' "$KWOK_PORT")
WITH_SCHEDULER=$WITH_SCHEDULER
WITH_CONTROLLER_MANAGER=$WITH_KCM
WITH_KWOK=$WITH_KWOK
EOF
}

on_exit() {
  local rc=$?
  if ((rc != 0)) && [[ -f "$STATE/pids" ]]; then
    log "start failed: stopping what was started"
    stop_recorded "$STATE" 10
  fi
}

main() {
  parse_args "$@"
  check_binaries
  prepare_state
  declare -gA PIDS=()
  T0="$(date +%s.%N)"
  DEADLINE=$((SECONDS + TIMEOUT))
  trap on_exit EXIT
  read -r ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT SCHEDULER_PORT KWOK_PORT <<<"$(free_ports 6)"
  generate_credentials
  start_etcd
  start_apiserver
  write_kubeconfig
  ((WITH_KCM)) && start_controller_manager
  ((WITH_SCHEDULER)) && start_scheduler
  ((WITH_KWOK)) && start_kwok
  write_env
  log "control plane ready in $(elapsed) s; state in $STATE (stop: scripts/k8s/stop.sh --state $STATE)"
  printf 'export KUBECONFIG=%s\n' "$STATE/kubeconfig"
}

main "$@"
