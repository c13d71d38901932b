#!/usr/bin/env bash
# Create N fake GPU Nodes that KWOK manages (kept Ready, their Pods run), following KWOK's documented
# node conventions: annotation kwok.x-k8s.io/node=fake (what start.sh's kwok selects), label type=kwok,
# taint kwok.x-k8s.io/node=fake:NoSchedule (so only pods that tolerate it land there), node TTL 0.
# Each node advertises nvidia.com/gpu in status.capacity/allocatable (the apiserver keeps the status
# given at creation; KWOK's node-initialize stage keeps existing capacity) and carries the labels
# gputwin.io/switch=leafK (NODES_PER_LEAF consecutive nodes per leaf switch) and gputwin.io/fake-node=true.
#
# Usage: scripts/k8s/fake-nodes.sh N GPUS_PER_NODE [--prefix NAME] [--nodes-per-leaf K] [--no-wait]
#   names are NAME-0 … NAME-(N-1) (default prefix gpu-node); K defaults to 4
#   waits (kubectl wait, bounded) until every node is Ready unless --no-wait
# Uses $KUBECONFIG (e.g. from `eval "$(scripts/k8s/start.sh)"`) and the cached kubectl if present.
# Delete them with: kubectl delete nodes -l gputwin.io/fake-node=true
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

PREFIX=gpu-node
PER_LEAF=4
WAIT=1

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

find_kubectl() {
  if [[ -x "$(k8s_bin_dir)/kubectl" ]]; then KUBECTL="$(k8s_bin_dir)/kubectl"
  elif command -v kubectl >/dev/null; then KUBECTL="$(command -v kubectl)"
  else die "no kubectl: run scripts/k8s/build.sh"; fi
}

node_manifest() {  # node_manifest NAME GPUS LEAF
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    kwok.x-k8s.io/node: fake
  labels:
    type: kwok
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: $1
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    gputwin.io/fake-node: "true"
    gputwin.io/switch: $3
spec:
  taints:
  - effect: NoSchedule
    key: kwok.x-k8s.io/node
    value: fake
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "$2"}
  capacity: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "$2"}
EOF
}

main() {
  local positional=()
  while (($#)); do
    case "$1" in
      --prefix) PREFIX="$2"; shift ;;
      --nodes-per-leaf) PER_LEAF="$2"; shift ;;
      --no-wait) WAIT=0 ;;
      -h|--help) usage; exit 0 ;;
      -*) die "unknown option: $1" ;;
      *) positional+=("$1") ;;
    esac
    shift
  done
  ((${#positional[@]} == 2)) || { usage >&2; exit 2; }
  local n="${positional[0]}" gpus="${positional[1]}" i names=()
  [[ "$n" =~ ^[0-9]+$ && "$gpus" =~ ^[0-9]+$ && "$PER_LEAF" =~ ^[1-9][0-9]*$ ]] \
    || die "N, GPUS_PER_NODE and --nodes-per-leaf must be whole numbers"
  find_kubectl
  for ((i = 0; i < n; i++)); do
    node_manifest "$PREFIX-$i" "$gpus" "leaf$((i / PER_LEAF))"
  done | "$KUBECTL" apply -f - >&2
  for ((i = 0; i < n; i++)); do names+=("node/$PREFIX-$i"); done
  if ((WAIT && n > 0)); then
    "$KUBECTL" wait --for=condition=Ready --timeout=60s "${names[@]}" >&2
  fi
  log "$n fake node(s) $PREFIX-0…$PREFIX-$((n - 1)) with $gpus nvidia.com/gpu each"
}

main "$@"
