#!/usr/bin/env bash
# Distributed training with torchrun, one process per GPU (per CPU process
# with the gloo backend on machines without CUDA).
#   bash tools/dist_train.sh CONFIG NGPUS [train.py options]
# Several nodes: run it on each node with NNODES, NODE_RANK, MASTER_ADDR
# and PORT set (the same PORT and MASTER_ADDR everywhere).
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: bash $0 CONFIG NGPUS [train.py options]" >&2
    exit 2
fi
CONFIG=$1
GPUS=$2
TOOLS="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tools/launch_checks.sh
. "$TOOLS/launch_checks.sh"
torchrun_tool "$GPUS" "$TOOLS/train.py" "$CONFIG" --launcher pytorch "${@:3}"
