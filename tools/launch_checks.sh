# The checks of the launcher settings that tools/dist_*.sh and
# tools/slurm_*.sh share (they source this file): a value they cannot use
# ends in one line and exit code 2 before anything starts.

# require_count NAME VALUE MIN MAX WHAT: VALUE is a whole number from MIN
# to MAX; WHAT says what NAME counts.
require_count() {
    if ! [[ $2 =~ ^[0-9]{1,6}$ ]] || ((10#$2 < $3 || 10#$2 > $4)); then
        echo "$1 must be a whole number from $3 to $4 ($5), got '$2'." >&2
        exit 2
    fi
}

# torchrun_tool GPUS TOOL ARGS...: run TOOL on GPUS processes per node of
# NNODES nodes (NODE_RANK, MASTER_ADDR and PORT from the environment),
# each value checked first; what stops torchrun (a busy port, too few
# GPUs, a worker that fails) ends in one line instead of its traceback.
torchrun_tool() {
    local gpus=$1
    shift
    NNODES=${NNODES:-1}
    NODE_RANK=${NODE_RANK:-0}
    PORT=${PORT:-29500}
    MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
    require_count NGPUS "$gpus" 1 65536 'processes per node, one per GPU'
    require_count NNODES "$NNODES" 1 65536 'nodes'
    require_count NODE_RANK "$NODE_RANK" 0 $((10#$NNODES - 1)) \
        'the place of this node among the NNODES'
    require_count PORT "$PORT" 1 65535 'the port where the processes meet'
    PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}" \
    exec "${PYTHON:-python}" -m t2t_plugin.cli.torchrun \
        --nnodes="$NNODES" \
        --node_rank="$NODE_RANK" \
        --master_addr="$MASTER_ADDR" \
        --master_port="$PORT" \
        --nproc_per_node="$gpus" \
        "$@"
}
