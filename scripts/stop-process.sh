# Sourced by the scripts that start `cambium up` (clients/server.sh, console.sh): one way to stop it.
#
# stop_process PID: Ctrl-C's clean stop (SIGINT), then SIGKILL if the process has not ended within 30 s, then
# reaps it (it must be a child of the calling shell). Never fails.
stop_process() {
    local pid=$1 _
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 300); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
