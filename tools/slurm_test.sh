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
TOOLS="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tools/launch_checks.sh
. "$TOOLS/launch_checks.sh"
srun_tool "$PARTITION" "$JOB_NAME" "$TOOLS/test.py" "$CONFIG" "$CHECKPOINT" \
    --launcher=slurm "${@:5}"
