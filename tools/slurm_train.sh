#!/usr/bin/env bash
# Training on a Slurm cluster, one task per GPU.
#   [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [GRES=gpu:8] [SRUN_ARGS=...] \
#   bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG [WORK_DIR] \
#       [train.py options]
# WORK_DIR defaults to work_dirs/<config name>.
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: bash $0 PARTITION JOB_NAME CONFIG [WORK_DIR] [options]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
# A 4th argument that starts with '-' is the first train.py option, not
# the work dir.
if [ $# -ge 4 ] && [ "${4#-}" = "$4" ]; then
    WORK_DIR=$4
    OPTIONS=("${@:5}")
else
    WORK_DIR="work_dirs/$(basename "${CONFIG%.py}")"
    OPTIONS=("${@:4}")
fi
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

# SRUN_ARGS is split into words on purpose: it holds several options.
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
    "${PYTHON:-python}" -u "$TOOLS/train.py" "$CONFIG" \
    --work-dir="$WORK_DIR" --launcher=slurm ${OPTIONS[@]+"${OPTIONS[@]}"}
