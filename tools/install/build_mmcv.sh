#!/usr/bin/env bash
# Install full mmcv 2.1.0 (with its compiled CPU ops, ``mmcv._ext``), which
# mmdetection 3.3 and mmsegmentation 1.2 need and which PyPI ships only as a
# source archive for this torch. The first build takes 25-40 minutes on two
# cores; the wheel is cached per torch version, so later installs take seconds.
#
# Usage: bash tools/install/build_mmcv.sh
# Env:   PYTHON (default python3), T2T_WHEEL_CACHE (default ~/.cache/t2t-plugin/wheels)
set -euo pipefail

PYTHON=${PYTHON:-python3}
MMCV_VERSION=2.1.0
CACHE=${T2T_WHEEL_CACHE:-$HOME/.cache/t2t-plugin/wheels}

if $PYTHON - <<PY 2>/dev/null
import mmcv, mmcv._ext  # noqa: F401
assert mmcv.__version__ == '$MMCV_VERSION'
PY
then
    echo "mmcv $MMCV_VERSION with compiled ops is already installed."
    exit 0
fi

TORCH_VERSION=$($PYTHON -c 'import torch; print(torch.__version__.split("+")[0])')
WHEEL_DIR="$CACHE/mmcv-$MMCV_VERSION-torch$TORCH_VERSION"
mkdir -p "$WHEEL_DIR"

if ! ls "$WHEEL_DIR"/mmcv-$MMCV_VERSION-*.whl >/dev/null 2>&1; then
    echo "Building mmcv $MMCV_VERSION with CPU ops against torch $TORCH_VERSION (25-40 min on 2 cores)..."
    # mmcv's setup.py imports pkg_resources (gone in setuptools 81) and must see
    # the installed torch (hence no build isolation, or the ops are skipped).
    $PYTHON -m pip install -q 'setuptools<81' wheel ninja
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    $PYTHON -m pip download -q --no-deps --no-binary :all: --no-build-isolation \
        -d "$WORK" "mmcv==$MMCV_VERSION"
    tar -xzf "$WORK"/mmcv-$MMCV_VERSION.tar.gz -C "$WORK"
    # torch 2.14's headers need C++20; mmcv hard-codes -std=c++17 and CXXFLAGS
    # cannot override it.
    sed -i 's/-std=c++17/-std=c++20/g' "$WORK/mmcv-$MMCV_VERSION/setup.py"
    (cd "$WORK/mmcv-$MMCV_VERSION" && \
        MMCV_WITH_OPS=1 FORCE_CUDA=0 MAX_JOBS=${MAX_JOBS:-2} \
        $PYTHON -m pip wheel --no-deps --no-build-isolation -w "$WHEEL_DIR.partial" .)
    mv "$WHEEL_DIR".partial/mmcv-$MMCV_VERSION-*.whl "$WHEEL_DIR"/
    rm -rf "$WHEEL_DIR.partial"
fi

# mmcv-lite and mmcv install the same package directory: keep only one.
$PYTHON -m pip uninstall -y -q mmcv-lite mmcv >/dev/null 2>&1 || true
$PYTHON -m pip install -q "$WHEEL_DIR"/mmcv-$MMCV_VERSION-*.whl
$PYTHON -c 'import mmcv, mmcv._ext; print("mmcv", mmcv.__version__, "with compiled ops installed")'
