#!/usr/bin/env bash
# Distributed evaluation with torchrun, one process per GPU (gloo on CPU).
#   bash tools/dist_test.sh CONFIG CHECKPOINT NGPUS [test.py options]
# Several nodes: set NNODES, NODE_RANK, MASTER_ADDR and PORT on each.
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: bash $0 CONFIG CHECKPOINT NGPUS [test.py options]" >&2
    exit 2
fi
CONFIG=$1
CHECKPOINT=$2
GPUS=$3
TOOLS="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tools/launch_checks.sh
. "$TOOLS/launch_checks.sh"
torchrun_tool "$GPUS" "$TOOLS/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "${@:4}"
