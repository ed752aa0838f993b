#!/usr/bin/env bash
# What idle branches cost: the CPU of `cambium up` over 10 s with one branch, then with N more (default 50) whose
# stores run (each defined branch's store starts in the background) and nobody connected.
#   CAMBIUM_BIN=target/release/cambium N=50 scripts/bench-idle-cpu.sh
# Prints the CPU time used in each 10 s window, in percent of one core (/proc/PID/stat utime + stime).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/idle-cpu.XXXXXX")
say() { echo "idle-cpu: $*" >&2; }
die() { say "$*"; exit 1; }
server_pid=""
trap '[ -n "$server_pid" ] && kill -INT "$server_pid" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT
declare -A DB_ID MAIN_BRANCH URI BRANCH_URI
# shellcheck source=clients/server.sh
source "$root/scripts/clients/server.sh"
start_server
create_database idle
ticks_per_s=$(getconf CLK_TCK)
window() {
    local t0 t1
    t0=$(awk '{print $14 + $15}' "/proc/$server_pid/stat")
    sleep 10
    t1=$(awk '{print $14 + $15}' "/proc/$server_pid/stat")
    echo "$1: $(( (t1 - t0) * 100 / (10 * ticks_per_s) )) % of one core"
}
sleep 3
window "1 branch"
n=${N:-50}
for i in $(seq "$n"); do api POST "/v1/databases/${DB_ID[idle]}/branches" "{\"name\":\"b$i\"}" >/dev/null; done
sleep 5
window "$((n + 1)) branches"
