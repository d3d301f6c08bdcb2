#!/usr/bin/env bash
# GPU acceptance check (.dev_scripts/gpu_check.py): benchmark, torch.compile, fp16
# --amp training and NCCL dist_train.sh on one GPU, in under 8 minutes, with
# a summary table (also in WORK_DIR/summary.md).
#   bash .dev_scripts/gpu_check.sh [--dry-run] [--work-dir DIR] [--official-repo PATH]
# --dry-run checks the script's wiring on the CPU with tiny sizes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
exec "${PYTHON:-python3}" "$ROOT/.dev_scripts/gpu_check.py" "$@"
