#!/usr/bin/env bash
# Install nvtest with no network from this bundle (copied into it as install.sh by
# scripts/gpu_evidence_bundle.sh). The machine keeps its own torch, cupy, numpy, pandas,
# nvidia-ml-py and mpi4py: the virtualenv sees the system's packages, and pip takes from the
# bundle only what the machine lacks (or has too old for nvtest).
#
#   bash install.sh [VENV] [CHECKOUT]
#
# VENV: the virtualenv (default ./.venv-evidence; an existing one is reused as it is). A new
#   one sees the packages of the Python that creates it ($PYTHON, default python3), its venv
#   or conda env included.
# CHECKOUT: an nvtest checkout, installed editable (its current code runs); without it the
#   bundled nvtest wheel is installed.
# GPU_EVIDENCE_SYSTEM_SITE=0: create the virtualenv without the system's packages.
# Every pip call is `pip install --no-index --find-links <bundle>/wheels` with pip's own
# configuration files ignored (PIP_CONFIG_FILE=/dev/null), so nothing is fetched.
# GPU_EVIDENCE_FROM_INDEX=1 (scripts/gpu_evidence.sh, where the package index answers): the
# same virtualenv, with pip installing from the package index as configured (PIP_INDEX_URL,
# pip.conf) instead of the bundle; no bundle is needed then.
set -euo pipefail
bundle=$(cd "$(dirname "$0")" && pwd -P)
VENV=${1:-.venv-evidence}
CHECKOUT=${2:-}
PY=${PYTHON:-python3}
FROM_INDEX=${GPU_EVIDENCE_FROM_INDEX:-0}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
if [ "$FROM_INDEX" != 1 ]; then
  export PIP_CONFIG_FILE=/dev/null
  unset PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS PIP_CONSTRAINT
fi

glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}' || true)
pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
want=$(cat "$bundle/PYTHON_VERSION" 2>/dev/null || echo "$pyver")
if [ "$FROM_INDEX" != 1 ] && [ "$pyver" != "$want" ]; then
  echo "install: warning: $PY is Python $pyver; the bundle's binary wheels are for $want" >&2
fi
if [ -n "$glibc" ]; then
  echo "install: glibc $glibc, Python $pyver, $([ "$FROM_INDEX" = 1 ] && echo "from the package index" || echo "bundle $bundle")" >&2
fi

if [ ! -x "$VENV/bin/python" ]; then
  site=--system-site-packages
  [ "${GPU_EVIDENCE_SYSTEM_SITE:-1}" = 0 ] && site=
  if ! "$PY" -m venv $site "$VENV" 2>/dev/null; then
    # no ensurepip (Debian without python3-venv): a venv without pip, driven by the system's pip
    "$PY" -m venv $site --without-pip "$VENV"
  fi
  if [ -n "$site" ]; then
    # the packages $PY sees, its own venv or conda env included (--system-site-packages alone
    # shows only the base interpreter's), after the virtualenv's own
    venv_site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$PY" -c 'import site, sysconfig
paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
if site.ENABLE_USER_SITE:
    paths.append(site.getusersitepackages())
print("\n".join(dict.fromkeys(paths)))' > "$venv_site/_gpu_machine_site.pth"
  fi
fi
if "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  pip=("$VENV/bin/python" -m pip)
else
  pip=("$PY" -m pip --python "$VENV/bin/python")
fi

if [ -n "$CHECKOUT" ]; then
  target=(-e "$CHECKOUT")
else
  target=(nvtest)
fi
if [ "$FROM_INDEX" = 1 ]; then
  "${pip[@]}" install "${target[@]}"
  "$VENV/bin/python" -c 'import nvtest.cli, nvtest; print("install: nvtest", nvtest.__version__, "in", "'"$VENV"'", "from the package index")' >&2
  exit 0
fi
offline=(install --no-index --find-links "$bundle/wheels")
if ! "${pip[@]}" "${offline[@]}" "${target[@]}"; then
  # a machine package pinned in a way pip cannot reconcile offline: install every bundled
  # wheel as it is, then say what pip thinks is inconsistent
  echo "install: resolving failed; installing the bundled wheels without dependency resolution" >&2
  "${pip[@]}" "${offline[@]}" --no-deps "$bundle"/wheels/*.whl
  if [ -n "$CHECKOUT" ]; then
    "${pip[@]}" "${offline[@]}" --no-deps --no-build-isolation "${target[@]}" || true
  fi
  "${pip[@]}" check >&2 || true
fi
"$VENV/bin/python" -c 'import nvtest.cli, nvtest; print("install: nvtest", nvtest.__version__, "in", "'"$VENV"'")' >&2
