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
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
TOOLS="$(cd "$(dirname "$0")" && pwd)"

PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}" \
exec "${PYTHON:-python}" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --master_port="$PORT" \
    --nproc_per_node="$GPUS" \
    "$TOOLS/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "${@:4}"
