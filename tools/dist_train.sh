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
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
TOOLS="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tools/launch_checks.sh
. "$TOOLS/launch_checks.sh"
require_count NGPUS "$GPUS" 1 65536 'processes per node, one per GPU'
require_count NNODES "$NNODES" 1 65536 'nodes'
require_count NODE_RANK "$NODE_RANK" 0 $((10#$NNODES - 1)) \
    'the place of this node among the NNODES'
require_count PORT "$PORT" 1 65535 'the port where the processes meet'

# torchrun; what stops it (a busy port, too few GPUs, a worker that
# fails) ends in one line instead of its traceback
PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}" \
exec "${PYTHON:-python}" -m t2t_plugin.cli.torchrun \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --master_port="$PORT" \
    --nproc_per_node="$GPUS" \
    "$TOOLS/train.py" "$CONFIG" --launcher pytorch "${@:3}"
