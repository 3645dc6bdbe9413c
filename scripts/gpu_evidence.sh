#!/usr/bin/env bash
# The GPU evidence kit: on the node it runs on, capture every GPU tool's output, run nvtest's
# probes alone and the delivery and burn-in suites, and write it all, sanitised, into $OUT
# (default ./gpu-evidence/): manifest.json, summary.md, captures/, probes/, runs/.
# The first thing to run on a GPU machine; see docs/gpu-evidence.md.
#
#   make gpu-evidence                          # or: bash scripts/gpu_evidence.sh [nvtest evidence options]
#   OUT=/somewhere GPU_EVIDENCE_SHORT=1 make gpu-evidence    # the short form (no GPU needed, ~1 minute)
#
# Python: $PYTHON if set; else .venv (make setup) or $GPU_EVIDENCE_VENV (default .venv-evidence)
# when it has this checkout's nvtest; else, with the offline bundle at $GPU_EVIDENCE_BUNDLE
# (default ./gpu-evidence-bundle, from `make gpu-evidence-bundle`), a virtualenv installed from
# it with no network; else a python3 that already has nvtest.
#
# Read-only on the node: no clocks, power limits, persistence, compute mode, ECC or MIG
# changes, no GPU reset; every step stops at its deadline (timeout -k), the whole kit within
# 8 minutes (--budget-s). It writes only under $OUT (and the virtualenv when it installs one).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-./gpu-evidence}
BUNDLE=${GPU_EVIDENCE_BUNDLE:-./gpu-evidence-bundle}
VENV=${GPU_EVIDENCE_VENV:-./.venv-evidence}
export PYTHONDONTWRITEBYTECODE=1
here=$(pwd -P)

# the interpreter imports this checkout's nvtest
has_this_nvtest() {
  [ -x "$1" ] || command -v "$1" >/dev/null 2>&1 || return 1
  local where
  where=$("$1" -c 'import nvtest.cli, os; print(os.path.realpath(os.path.dirname(nvtest.__file__)))' 2>/dev/null) || return 1
  [ "$where" = "$here/nvtest" ]
}

pick_python() {
  if [ -n "${PYTHON:-}" ]; then
    echo "$PYTHON"
    return
  fi
  for py in .venv/bin/python "$VENV/bin/python"; do
    if has_this_nvtest "$py"; then
      echo "$py"
      return
    fi
  done
  if [ -f "$BUNDLE/install.sh" ]; then
    echo "gpu-evidence: installing nvtest from $BUNDLE into $VENV (no network)" >&2
    bash "$BUNDLE/install.sh" "$VENV" "$here" >&2
    echo "$VENV/bin/python"
    return
  fi
  for py in python3 python; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import nvtest.cli' >/dev/null 2>&1; then
      echo "$py"
      return
    fi
  done
  echo "gpu-evidence: no Python with nvtest here, and no bundle at $BUNDLE." >&2
  echo "  On a machine with network: make gpu-evidence-bundle; carry gpu-evidence-bundle/ beside this checkout." >&2
  exit 2
}

py=$(pick_python)
args=(--out "$OUT")
if [ "${GPU_EVIDENCE_SHORT:-0}" = 1 ]; then
  args+=(--short)
fi
exec "$py" -m nvtest.cli evidence "${args[@]}" "$@"
