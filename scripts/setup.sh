#!/usr/bin/env bash
# Install everything nvtest and its tests need on a fresh Debian machine:
# Debian packages (when run as root with apt-get), then a virtualenv in .venv with
# nvtest (editable), its test tools and torch 2.13.0 (CPU build).
# Idempotent: a stamp file per step skips what is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
STAMPS=.venv-stamps
mkdir -p "$STAMPS"

APT_PACKAGES=(
  build-essential pciutils iproute2 procps
  openssh-server openssh-client
  munge slurm-wlm slurm-client
  openmpi-bin libopenmpi-dev
  iperf3 poppler-utils
  postgresql
  chromium fonts-dejavu-core fonts-liberation
  libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0
)

apt_hash=$(echo "${APT_PACKAGES[*]}" | sha1sum | cut -c1-12)
if [ ! -f "$STAMPS/apt-$apt_hash" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
      # a daemon already running belongs to this machine (its own sshd, munge, Slurm):
      # it is left alone; only one that the packages installed here just started is stopped
      was_active=()
      for svc in munge slurmctld slurmd ssh; do
        if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
          was_active+=("$svc")
        fi
      done
      echo "setup: apt-get install ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
      # the Debian packages start these daemons on install; the tests start their own
      # (postgresql: tests/history starts a server of its own in a temp dir, nvtest.testing.postgres)
      for svc in munge slurmctld slurmd ssh; do
        case " ${was_active[*]} " in *" $svc "*) continue ;; esac
        if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
          systemctl stop "$svc" || true
        fi
      done
    fi
    touch "$STAMPS/apt-$apt_hash"
  else
    echo "setup: not root or no apt-get: skipping Debian packages (${APT_PACKAGES[*]})" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
req_hash=$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-12)
if [ ! -f "$STAMPS/pip-$req_hash" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  # torch 2.13.0 is the CPU build present on these machines; any other spec may download GBs
  "$VENV/bin/python" -m pip install -q -e '.[test,resilience]' 'torch==2.13.0' 'mpi4py>=3.1' 2>&1 | grep -v '^WARNING: Location' || true
  "$VENV/bin/python" -c "import nvtest, torch, pytest, hypothesis" 
  touch "$STAMPS/pip-$req_hash"
fi
echo "setup: done ($VENV)"
