# Shell helpers shared by the scripts and bench/bench.sh (sourced).

# Stops a child process by pid: SIGTERM, up to 5 s for it to exit, SIGKILL.
stop_pid() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# run_parallel JOBS FN ITEM...: FN ITEM for each item, JOBS at a time, in the
# background; returns when all are done (FN records its own outcome).
run_parallel() {
    local jobs=$1 fn=$2 running=0 item
    shift 2
    for item in "$@"; do
        "$fn" "$item" &
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then
            wait -n || true
            running=$((running - 1))
        fi
    done
    wait
}
