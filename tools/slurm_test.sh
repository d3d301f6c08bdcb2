#!/usr/bin/env bash
# Evaluation on a Slurm cluster, one task per GPU.
#   [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [GRES=gpu:8] [SRUN_ARGS=...] \
#   bash tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT \
#       [test.py options]
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "usage: bash $0 PARTITION JOB_NAME CONFIG CHECKPOINT [options]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
CHECKPOINT=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
# The generic resources of each node, gpu:GPUS_PER_NODE unless set; set
# empty (GRES=) for CPU tasks (gloo) on nodes without GPUs, where Slurm
# refuses a request for GPUs.
GRES=${GRES-gpu:$GPUS_PER_NODE}
GRES_ARGS=()
if [ -n "$GRES" ]; then
    GRES_ARGS=(--gres="$GRES")
fi
TOOLS="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tools/launch_checks.sh
. "$TOOLS/launch_checks.sh"
require_count GPUS "$GPUS" 1 65536 'tasks in all, one per GPU'
require_count GPUS_PER_NODE "$GPUS_PER_NODE" 1 65536 'tasks per node'
require_count CPUS_PER_TASK "$CPUS_PER_TASK" 1 65536 'CPUs of each task'

# shellcheck disable=SC2086
PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}" \
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    ${GRES_ARGS[@]+"${GRES_ARGS[@]}"} \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    $SRUN_ARGS \
    "${PYTHON:-python}" -u "$TOOLS/test.py" "$CONFIG" "$CHECKPOINT" \
    --launcher=slurm "${@:5}"
