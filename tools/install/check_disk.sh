#!/usr/bin/env bash
# Usage: check_disk.sh PATH GB WHAT
# Exits 1 with one line when the file system holding PATH (or its nearest
# existing parent) has less than GB gigabytes free for WHAT.
set -euo pipefail
path=$1 need_gb=$2 what=$3
while [ ! -e "$path" ]; do path=$(dirname "$path"); done
free_kb=$(df -Pk "$path" | awk 'NR == 2 {print $4}')
free_gb=$((free_kb / 1024 / 1024))
if [ "$free_gb" -lt "$need_gb" ]; then
    echo "Not enough disk for $what: it needs about $need_gb GB, $path has $free_gb GB free. Free some space (or set T2T_WHEEL_CACHE / PYTHON=... to put it elsewhere) and run again." >&2
    exit 1
fi
