#!/usr/bin/env bash
# Install full mmcv 2.1.0 (with its compiled ops, ``mmcv._ext``), which
# mmdetection 3.3 and mmsegmentation 1.2 need. OpenMMLab publishes prebuilt
# CUDA wheels only for torch <= 2.1 (docs/install.md); for any other torch
# this builds one from the registry's source archive.
#
# CPU or CUDA ops is decided by tools/install/mmcv_build.py: CUDA ops when
# torch sees a GPU and a CUDA compiler of torch's CUDA version exists, a
# one-line refusal when torch sees a GPU and there is none, CPU ops when
# torch sees no GPU. The wheel is cached per mmcv, torch, cpu/cuXXX and
# Python: the first build takes 25-40 minutes on two cores, later installs
# take seconds.
#
# Usage: bash tools/install/build_mmcv.sh
# Env:   PYTHON (default python3), MAX_JOBS (default 2),
#        T2T_WHEEL_CACHE (default ~/.cache/t2t-plugin/wheels); a folder
#        ../shared/wheels beside the checkout is searched too.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-python3}
MMCV_VERSION=2.1.0
CACHE=${T2T_WHEEL_CACHE:-$HOME/.cache/t2t-plugin/wheels}
SHARED=$ROOT/../shared/wheels

# MMCV_KIND, MMCV_DEVICE_KEY, MMCV_CACHE_KEY, PYTHON_TAG, MMCV_CXX_STD,
# MMCV_BUILD_ENV; or a one-line refusal (exit 2).
PLAN=$($PYTHON "$HERE/mmcv_build.py" plan) || exit 2
eval "$PLAN"

if $PYTHON - <<PY 2>/dev/null
import mmcv
from mmcv import _ext
assert mmcv.__version__ == '$MMCV_VERSION'
# any ops serve the CPU (a shared environment may hold CUDA ops for the
# GPU nodes: keep them); a GPU needs CUDA ops
assert '$MMCV_KIND' == 'cpu' or _ext.get_compiling_cuda_version() != 'not available'
PY
then
    echo "mmcv $MMCV_VERSION with compiled ops for $MMCV_KIND is already installed."
    exit 0
fi

# The first cached wheel for this key and Python: the cache, then
# ../shared/wheels, then the folders given.
find_wheel() {
    local dir file
    for dir in "$CACHE/$MMCV_CACHE_KEY" "$SHARED/$MMCV_CACHE_KEY" "$@"; do
        for file in "$dir"/mmcv-$MMCV_VERSION-$PYTHON_TAG-*.whl; do
            if [ -f "$file" ]; then
                echo "$file"
                return 0
            fi
        done
    done
}

# Wheels cached before the key named cpu/cuXXX do not say which ops they
# have: they serve a CPU plan only (any ops run on the CPU).
LEGACY=()
if [ "$MMCV_KIND" = cpu ]; then
    TORCH_ONLY_KEY=${MMCV_CACHE_KEY%-cpu}
    LEGACY=("$CACHE/$TORCH_ONLY_KEY" "$SHARED/$TORCH_ONLY_KEY")
fi
WHEEL=$(find_wheel "${LEGACY[@]}")

if [ -z "$WHEEL" ]; then
    WHEEL_DIR="$CACHE/$MMCV_CACHE_KEY"
    echo "Building mmcv $MMCV_VERSION with $MMCV_KIND ops ($MMCV_DEVICE_KEY) for $MMCV_CACHE_KEY (25-40 min on 2 cores)..."
    # mmcv's setup.py imports pkg_resources (gone in setuptools 81) and must
    # see the installed torch (hence no build isolation, or the ops are
    # skipped).
    $PYTHON -m pip install -q 'setuptools<81' wheel ninja
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    $PYTHON -m pip download -q --no-deps --no-binary :all: --no-build-isolation \
        -d "$WORK" "mmcv==$MMCV_VERSION"
    tar -xzf "$WORK"/mmcv-$MMCV_VERSION.tar.gz -C "$WORK"
    # Recent torch headers need C++20; mmcv hard-codes -std=c++17 and
    # CXXFLAGS cannot override it: use the standard torch's builder uses.
    sed -i "s/-std=c++17/-std=$MMCV_CXX_STD/g" "$WORK/mmcv-$MMCV_VERSION/setup.py"
    mkdir -p "$WHEEL_DIR.partial"
    (cd "$WORK/mmcv-$MMCV_VERSION" && \
        env $MMCV_BUILD_ENV MAX_JOBS=${MAX_JOBS:-2} \
        $PYTHON -m pip wheel --no-deps --no-build-isolation -w "$WHEEL_DIR.partial" .)
    mkdir -p "$WHEEL_DIR"
    mv "$WHEEL_DIR".partial/mmcv-$MMCV_VERSION-*.whl "$WHEEL_DIR"/
    rm -rf "$WHEEL_DIR.partial"
    WHEEL=$(find_wheel)
fi

# Never a CPU-only wheel where torch sees a GPU (one line, exit 2).
$PYTHON "$HERE/mmcv_build.py" check-wheel "$WHEEL" || exit 2

# mmcv-lite and mmcv install the same package directory: keep only one.
$PYTHON -m pip uninstall -y -q mmcv-lite mmcv >/dev/null 2>&1 || true
$PYTHON -m pip install -q "$WHEEL"
$PYTHON -c 'import mmcv; from mmcv import _ext; print("mmcv", mmcv.__version__, "installed, CUDA ops:", _ext.get_compiling_cuda_version())'
