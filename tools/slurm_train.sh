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
TOOLS="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tools/launch_checks.sh
. "$TOOLS/launch_checks.sh"
srun_tool "$PARTITION" "$JOB_NAME" "$TOOLS/train.py" "$CONFIG" \
    --work-dir="$WORK_DIR" --launcher=slurm ${OPTIONS[@]+"${OPTIONS[@]}"}
