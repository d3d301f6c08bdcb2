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
