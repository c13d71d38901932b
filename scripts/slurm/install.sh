#!/usr/bin/env bash
# Install Debian's SLURM (22.05 on Debian 12, 24.11 on Debian 13), slurmdbd, munge and MariaDB for
# the single-host test cluster of scripts/slurm/start.sh. Idempotent: when every package is already
# installed it only reports the version. No system service is started or enabled: package scripts
# run under a policy-rc.d that exits 101, and start.sh runs its own daemons in a state folder.
# Needs root (apt-get). Usage: bash scripts/slurm/install.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

POLICY=/usr/sbin/policy-rc.d

missing_packages() {
  local pkg
  for pkg in "${SLURM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed$' || printf '%s\n' "$pkg"
  done
}

# with_policy_rc CMD...: run CMD with a policy-rc.d that forbids starting services, then put back
# whatever was there before (many container images ship their own exit-101 policy already).
with_policy_rc() {
  local saved=""
  if [[ -e "$POLICY" ]]; then
    saved="$(mktemp)"
    cp -p "$POLICY" "$saved"
  fi
  printf '#!/bin/sh\n# gputwin scripts/slurm/install.sh: no service starts during package installs\nexit 101\n' >"$POLICY"
  chmod 755 "$POLICY"
  local rc=0
  "$@" || rc=$?
  if [[ -n "$saved" ]]; then
    cp -p "$saved" "$POLICY" && rm -f "$saved"
  else
    rm -f "$POLICY"
  fi
  return "$rc"
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "$@"
}

main() {
  [[ "$(id -u)" == 0 ]] || die "install.sh needs root (apt-get)"
  local missing
  mapfile -t missing < <(missing_packages)
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    local started=$SECONDS
    with_policy_rc apt_install "${SLURM_PACKAGES[@]}"
    log "packages installed in $((SECONDS - started)) s"
  else
    log "packages already installed"
  fi
  local cmd
  for cmd in "${SLURM_COMMANDS[@]}"; do
    command -v "$cmd" >/dev/null || die "$cmd missing after install"
  done
  # The emulator packages replace the real daemons through alternatives; refuse to go on with them.
  if dpkg-query -W -f='${Status}\n' slurm-wlm-emulator 2>/dev/null | grep -q 'installed'; then
    die "slurm-wlm-emulator is installed: its daemons cannot start; remove it (apt-get purge slurm-wlm-emulator)"
  fi
  detect_slurm
  log "SLURM $SLURM_VERSION (series $SLURM_SERIES) ready"
}

main "$@"
