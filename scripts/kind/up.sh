#!/usr/bin/env bash
# Try the gputwin operator's Kubernetes backend on a local kind cluster (needs Docker, kind, kubectl,
# curl). One command, about 3-5 minutes the first time (the image build dominates):
#   1. creates the kind cluster of kind-config.yaml (a control plane and four workers, labelled
#      with their leaf switch, partition and GPU count), unless it exists already;
#   2. advertises nvidia.com/gpu on each worker: a JSON patch on the Node's status subresource
#      through `kubectl proxy` (kind nodes have no GPUs; the sample pods only sleep);
#   3. builds the operator image from the Dockerfile (gputwin:dev) and loads it into kind, and
#      loads busybox (the sample pods' image), so nothing is pulled from inside the cluster;
#   4. installs the CRDs (crds/) and the operator (manifests/operator/) with GPUTWIN_BACKEND=kubernetes;
#   5. applies the sample: manifests/kind/cluster.yaml (topology, partitions, policies matching the
#      workers) and manifests/kind/jobs.yaml (GPUJobs and a plain Pod whose containers sleep).
# Then watch it:  kubectl get gpujobs -w     kubectl get pods -o wide -L gputwin.io/partition
# Remove it:      scripts/kind/down.sh
#
# Usage: scripts/kind/up.sh [--name NAME] [--no-build] [--no-sample]
#   --name NAME   kind cluster name (default: the name in kind-config.yaml, gputwin); the sample
#                 topology names the nodes gputwin-worker…, so keep the default to run the sample
#   --no-build    use the gputwin:dev image already in Docker instead of building it
#   --no-sample   install everything but the sample cluster and jobs
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

NAME=gputwin
BUILD=1
SAMPLE=1
IMAGE=gputwin:dev        # the image manifests/operator/30-deployment.yaml runs
SLEEPER=busybox:1.36     # the image of manifests/kind/jobs.yaml's pods

parse_args() {
  while (($#)); do
    case "$1" in
      --name) NAME="$2"; shift ;;
      --no-build) BUILD=0 ;;
      --no-sample) SAMPLE=0 ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
  done
  [[ "$NAME" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "--name '$NAME' is not a valid kind cluster name"
  CONTEXT="kind-$NAME"
}

k() { kubectl --context "$CONTEXT" "$@"; }

create_cluster() {
  if cluster_exists "$NAME"; then
    log "kind cluster $NAME exists: reusing it"
  else
    log "creating kind cluster $NAME from kind-config.yaml"
    kind create cluster --name "$NAME" --config "$REPO_ROOT/kind-config.yaml" --wait 180s
  fi
}

# Every worker labelled gputwin.io/gpus gets that many nvidia.com/gpu in its status.
advertise_gpus() {
  local lines node gpus count=0
  lines="$(k get nodes -l gputwin.io/gpus \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.labels.gputwin\.io/gpus}{"\n"}{end}')"
  [[ -n "$lines" ]] || die "no node carries the label gputwin.io/gpus: was the cluster made from kind-config.yaml?"
  start_proxy "$CONTEXT"
  trap stop_proxy EXIT
  while read -r node gpus; do
    [[ -n "$node" ]] || continue
    valid_count "$gpus" || die "node $node: label gputwin.io/gpus='$gpus' is not a whole number"
    patch_node_gpus "$PROXY_URL" "$node" "$gpus"
    log "  $node: nvidia.com/gpu = $gpus"
    count=$((count + 1))
  done <<<"$lines"
  stop_proxy
  trap - EXIT
  log "advertised GPUs on $count worker(s)"
}

load_images() {
  if ((BUILD)); then
    log "building $IMAGE from the Dockerfile (a few minutes the first time)"
    docker build -t "$IMAGE" "$REPO_ROOT"
  fi
  docker image inspect "$IMAGE" >/dev/null 2>&1 || die "no $IMAGE image in Docker: run without --no-build"
  docker image inspect "$SLEEPER" >/dev/null 2>&1 || docker pull "$SLEEPER"
  kind load docker-image "$IMAGE" "$SLEEPER" --name "$NAME"
}

install_operator() {
  log "installing the CRDs and the operator (GPUTWIN_BACKEND=kubernetes)"
  k apply -k "$REPO_ROOT/crds/"
  k wait --for=condition=Established --timeout=60s -f "$REPO_ROOT/crds/"
  k apply -k "$REPO_ROOT/manifests/operator/"
  k -n gputwin-system set env deployment/gputwin-operator GPUTWIN_BACKEND=kubernetes
  k -n gputwin-system rollout status deployment/gputwin-operator --timeout=180s
}

apply_sample() {
  log "applying the sample cluster and jobs (manifests/kind/)"
  k apply -f "$REPO_ROOT/manifests/kind/cluster.yaml"
  k wait --for=condition=Ready --timeout=60s switchtopology/kind gpupartition/train gpupartition/infer
  k apply -f "$REPO_ROOT/manifests/kind/jobs.yaml"
}

main() {
  parse_args "$@"
  need kind kubectl docker curl
  create_cluster
  advertise_gpus
  load_images
  install_operator
  ((SAMPLE)) && apply_sample
  log "done. kubectl config use-context $CONTEXT; then: kubectl get gpujobs -w"
  log "remove it with: scripts/kind/down.sh${NAME:+ --name $NAME}"
}

main "$@"
