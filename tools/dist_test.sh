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
    "$TOOLS/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "${@:4}"
