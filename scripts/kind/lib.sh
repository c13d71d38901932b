# shellcheck shell=bash disable=SC2034  # REPO_ROOT, PROXY_URL: set here, used by the scripts that source it
# Shared helpers of scripts/kind/*.sh (sourced, not run). tests/k8s/test_k8s_kind_assets.py runs
# patch_node_gpus against a real API server, so the patch tested is the one up.sh sends.

KIND_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$KIND_SCRIPTS_DIR/../.." && pwd)"
GPU_RESOURCE_PATH='nvidia.com~1gpu'   # "nvidia.com/gpu" as a JSON pointer segment ("/" -> "~1")

log() { printf '[kind %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need() {  # need CMD...: each command must be on PATH
  local cmd
  for cmd in "$@"; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd is not installed (see the header of $0)"
  done
}

# cluster_exists NAME: kind knows a cluster of that name (no pipe: grep -q would SIGPIPE kind under pipefail).
cluster_exists() {
  local clusters
  clusters="$(kind get clusters 2>/dev/null)" || clusters=""
  grep -qx -- "$1" <<<"$clusters"
}

# Names and counts come from the cluster; check them before they go into a URL or a patch.
valid_node_name() { [[ "$1" =~ ^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$ ]]; }
valid_count() { [[ "$1" =~ ^[0-9]{1,4}$ ]]; }

# gpu_patch N: the JSON patch that advertises N nvidia.com/gpu in a Node's status (capacity and
# allocatable; "add" replaces an existing value). Kubernetes' "advertise extended resources for a
# node" recipe: the kubelet keeps an extended resource no device plugin manages.
gpu_patch() {
  valid_count "$1" || die "GPU count '$1' is not a whole number"
  printf '[{"op":"add","path":"/status/capacity/%s","value":"%s"},' "$GPU_RESOURCE_PATH" "$1"
  printf '{"op":"add","path":"/status/allocatable/%s","value":"%s"}]\n' "$GPU_RESOURCE_PATH" "$1"
}

# patch_node_gpus PROXY_URL NODE N: send gpu_patch N to NODE's status subresource through a
# `kubectl proxy` listening at PROXY_URL (e.g. http://127.0.0.1:8001). Fails on any HTTP error.
patch_node_gpus() {
  local proxy="$1" node="$2" gpus="$3" patch
  valid_node_name "$node" || die "node name '$node' is not a valid Node name"
  # Checked here, not only in gpu_patch: a die inside $(...) would end the subshell, not this function.
  valid_count "$gpus" || die "GPU count '$gpus' is not a whole number"
  patch="$(gpu_patch "$gpus")"
  curl --silent --show-error --fail-with-body --max-time 20 \
    -H 'Content-Type: application/json-patch+json' -X PATCH \
    --data "$patch" "$proxy/api/v1/nodes/$node/status" >/dev/null
}

# start_proxy CONTEXT: `kubectl proxy` on a free port; sets PROXY_URL and PROXY_PID (stop_proxy ends it).
start_proxy() {
  local out; out="$(mktemp)"
  kubectl ${1:+--context "$1"} proxy --port=0 --address=127.0.0.1 >"$out" 2>&1 &
  PROXY_PID=$!
  local i port=""
  for ((i = 0; i < 100; i++)); do   # it prints "Starting to serve on 127.0.0.1:PORT"
    port="$(sed -n 's/^Starting to serve on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$out")"
    [[ -n "$port" ]] && break
    kill -0 "$PROXY_PID" 2>/dev/null || { cat "$out" >&2; rm -f "$out"; die "kubectl proxy exited"; }
    sleep 0.1
  done
  rm -f "$out"
  [[ -n "$port" ]] || die "kubectl proxy did not say which port it serves on"
  PROXY_URL="http://127.0.0.1:$port"
}

stop_proxy() {
  if [[ -n "${PROXY_PID:-}" ]]; then
    kill "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
    PROXY_PID=""
  fi
}
