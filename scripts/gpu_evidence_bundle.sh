#!/usr/bin/env bash
# Build the offline bundle of the GPU evidence kit into one directory (default
# ./gpu-evidence-bundle, or $GPU_EVIDENCE_BUNDLE, or the first argument), under 64 MiB:
#
#   wheels/          nvtest's wheel and every wheel it needs that a GPU machine may lack, for
#                    CPython $GPU_EVIDENCE_PYTHON_VERSION (default 3.11), manylinux x86_64
#                    (glibc <= 2.34), plus hatchling and editables to install a checkout editable
#   install.sh       the offline installer (scripts/gpu_evidence_install.sh)
#   PYTHON_VERSION   the Python the binary wheels are for
#   SHA256SUMS       of the wheels
#   README.txt       what this is and how to use it
#
# Left out: what such a machine has and must keep its own build of (torch, cupy, numpy,
# pandas, nvidia-ml-py, mpi4py). Optional extras (pdf, parquet, browser, resilience) too.
# Needs a package index (pip's configuration on this machine); run `make gpu-evidence-bundle`.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${1:-${GPU_EVIDENCE_BUNDLE:-gpu-evidence-bundle}}
PYVER=${GPU_EVIDENCE_PYTHON_VERSION:-3.11}
MAX_MIB=64
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
MACHINE_HAS=(torch cupy numpy pandas nvidia_ml_py mpi4py)

rm -rf "$DIR"
mkdir -p "$DIR/wheels"
echo "bundle: nvtest wheel" >&2
"$PY" -m pip wheel --no-deps -q -w "$DIR/wheels" .

platforms=()
for minor in $(seq 5 34); do
  platforms+=(--platform "manylinux_2_${minor}_x86_64")
done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
echo "bundle: dependencies for CPython $PYVER, manylinux x86_64" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$PY" -m pip download -q -d "$DIR/wheels" --only-binary=:all: "${platforms[@]}" \
  --python-version "$PYVER" --implementation cp --abi "cp${PYVER/./}" \
  "$DIR"/wheels/nvtest-*.whl 'hatchling>=1.21' 'editables>=0.3' >"$log" 2>&1; then
  grep -v 'is ignored: it is neither a file nor a directory' "$log" >&2 || true
  echo "bundle: pip download failed" >&2
  exit 1
fi

for name in "${MACHINE_HAS[@]}"; do
  rm -f "$DIR"/wheels/"$name"-*.whl
done
cp scripts/gpu_evidence_install.sh "$DIR/install.sh"
echo "$PYVER" > "$DIR/PYTHON_VERSION"
(cd "$DIR/wheels" && sha256sum ./*.whl) > "$DIR/SHA256SUMS"
cat > "$DIR/README.txt" <<EOF
nvtest GPU evidence bundle: the wheels nvtest needs beyond what a GPU machine has
(it keeps its own ${MACHINE_HAS[*]}), for CPython $PYVER on manylinux x86_64.
Carry this directory beside an nvtest checkout; on the GPU machine, with no network:

    make gpu-evidence          # installs from here into .venv-evidence, then runs the kit

or by hand: bash $(basename "$DIR")/install.sh .venv-evidence "\$PWD"   (pip install --no-index --find-links)
See docs/gpu-evidence.md in the checkout.
EOF

size_kib=$(du -sk "$DIR" | cut -f1)
if [ "$size_kib" -gt $((MAX_MIB * 1024)) ]; then
  echo "bundle: $DIR is $((size_kib / 1024)) MiB, over $MAX_MIB MiB" >&2
  exit 1
fi
echo "bundle: $DIR ($(ls "$DIR"/wheels | wc -l) wheels, $((size_kib / 1024)) MiB)" >&2
