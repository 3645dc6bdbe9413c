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
# it with no network; else, where the package index answers (one HEAD request, 5 s at most, to
# $PIP_INDEX_URL, pip's configured index, or https://pypi.org/simple/), the same virtualenv
# installed from the index; else a python3 that already has nvtest.
# GPU_EVIDENCE_PLAN=1: say which of these it would take, and stop (no install, no run).
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

# the package index pip would use, and whether it answers a HEAD request within 5 s
index_url() {
  local url=${PIP_INDEX_URL:-}
  if [ -z "$url" ]; then
    url=$(timeout 10 python3 -m pip config get global.index-url 2>/dev/null || true)
  fi
  echo "${url:-https://pypi.org/simple/}"
}
index_answers() {
  timeout -k 2 8 python3 - "$1" <<'PYEOF' >/dev/null 2>&1
import sys, urllib.error, urllib.request
url = sys.argv[1].rstrip("/") + "/pip/"
try:
    urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5)
except urllib.error.HTTPError:
    pass  # an HTTP answer, even 404: the index is there (pip says the rest)
PYEOF
}

plan() {
  if [ "${GPU_EVIDENCE_PLAN:-0}" = 1 ]; then
    echo "gpu-evidence: plan: $*"
    exit 0
  fi
}

pick_python() {
  if [ -n "${PYTHON:-}" ]; then
    plan "use \$PYTHON ($PYTHON)" >&2
    echo "$PYTHON"
    return
  fi
  for py in .venv/bin/python "$VENV/bin/python"; do
    if has_this_nvtest "$py"; then
      plan "use $py (it has this checkout's nvtest)" >&2
      echo "$py"
      return
    fi
  done
  if [ -f "$BUNDLE/install.sh" ]; then
    plan "install from the bundle $BUNDLE into $VENV (no network)" >&2
    echo "gpu-evidence: installing nvtest from $BUNDLE into $VENV (no network)" >&2
    bash "$BUNDLE/install.sh" "$VENV" "$here" >&2
    echo "$VENV/bin/python"
    return
  fi
  local url
  url=$(index_url)
  if index_answers "$url"; then
    plan "install from the package index $url into $VENV (it answers)" >&2
    echo "gpu-evidence: the package index $url answers: installing nvtest into $VENV" >&2
    GPU_EVIDENCE_FROM_INDEX=1 bash scripts/gpu_evidence_install.sh "$VENV" "$here" >&2
    echo "$VENV/bin/python"
    return
  fi
  for py in python3 python; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import nvtest.cli' >/dev/null 2>&1; then
      plan "use $py (it has nvtest; the package index $url does not answer)" >&2
      echo "$py"
      return
    fi
  done
  plan "none: no Python with nvtest, no bundle at $BUNDLE, the package index $url does not answer" >&2
  echo "gpu-evidence: no Python with nvtest here, no bundle at $BUNDLE, and the package index $url does not answer." >&2
  echo "  With network: make gpu-evidence again once the index answers (or set PIP_INDEX_URL to a mirror)." >&2
  echo "  Without network: make gpu-evidence-bundle on a machine with network; carry gpu-evidence-bundle/ beside this checkout." >&2
  exit 2
}

py=$(pick_python)
if [ "${GPU_EVIDENCE_PLAN:-0}" = 1 ]; then
  exit 0
fi
args=(--out "$OUT")
if [ "${GPU_EVIDENCE_SHORT:-0}" = 1 ]; then
  args+=(--short)
fi
exec "$py" -m nvtest.cli evidence "${args[@]}" "$@"
