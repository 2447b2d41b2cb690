# Shell helpers shared by scripts/demo.sh and bench/bench.sh (sourced).

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
