# The checks of the launcher settings and the launch commands that
# tools/dist_*.sh and tools/slurm_*.sh share (they source this file): a
# value they cannot use ends in one line and exit code 2 before anything
# starts.

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
    exec "${PYTHON:-python}" -m t2t_preflight.launch \
        --nnodes="$NNODES" \
        --node_rank="$NODE_RANK" \
        --master_addr="$MASTER_ADDR" \
        --master_port="$PORT" \
        --nproc_per_node="$gpus" \
        "$@"
}

# srun_tool PARTITION JOB_NAME TOOL ARGS...: run TOOL under srun in
# PARTITION as JOB_NAME, GPUS tasks in all, GPUS_PER_NODE on each node,
# CPUS_PER_TASK CPUs each (GRES and SRUN_ARGS from the environment), each
# value checked first.
srun_tool() {
    local partition=$1 job_name=$2
    shift 2
    GPUS=${GPUS:-8}
    GPUS_PER_NODE=${GPUS_PER_NODE:-8}
    CPUS_PER_TASK=${CPUS_PER_TASK:-5}
    SRUN_ARGS=${SRUN_ARGS:-""}
    # The generic resources of each node, gpu:GPUS_PER_NODE unless set;
    # set empty (GRES=) for CPU tasks (gloo) on nodes without GPUs, where
    # Slurm refuses a request for GPUs.
    GRES=${GRES-gpu:$GPUS_PER_NODE}
    local gres_args=()
    if [ -n "$GRES" ]; then
        gres_args=(--gres="$GRES")
    fi
    require_count GPUS "$GPUS" 1 65536 'tasks in all, one per GPU'
    require_count GPUS_PER_NODE "$GPUS_PER_NODE" 1 65536 'tasks per node'
    require_count CPUS_PER_TASK "$CPUS_PER_TASK" 1 65536 'CPUs of each task'
    # SRUN_ARGS is split into words on purpose: it holds several options.
    # shellcheck disable=SC2086
    PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}" \
    srun -p "$partition" \
        --job-name="$job_name" \
        ${gres_args[@]+"${gres_args[@]}"} \
        --ntasks="$GPUS" \
        --ntasks-per-node="$GPUS_PER_NODE" \
        --cpus-per-task="$CPUS_PER_TASK" \
        --kill-on-bad-exit=1 \
        $SRUN_ARGS \
        "${PYTHON:-python}" -u "$@"
}
