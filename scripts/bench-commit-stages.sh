#!/usr/bin/env bash
# Where a warm one-row autocommit commit's time goes (issue 12 item 8), on Cambium and PostgreSQL 15 side by
# side in one run on this machine. For each server: a fresh database with one table of one row, warmed, then
# `pgbench -n -c 1 -T SECONDS` of three one-statement scripts: `SELECT 1` (the wire and session alone), a
# one-row `SELECT` and a one-row autocommit `UPDATE`. For Cambium the compute's stage counters (`/metrics`:
# `cambium_compute_session_*`, `cambium_compute_commit_*`) are read before and after each run, which splits
# the statement's latency into:
#   wire/session  the client's latency less the session call as its connection saw it (pgbench, the wire,
#                 pgwire, the connection's loop)
#   hand-off      the call as its connection saw it less its SQLite work (since calls run on the connection's
#                 own thread: the registration with the statements' watchdog)
#   SQLite        the call on the SQLite thread less its commit and its wait for durability (parsing, the
#                 dialect, SQLite, page reads)
#   commit        what the SQLite thread spent on the commit: the VFS's xSync (the record built and handed to
#                 the proposer, and before early lock release the wait for it) and, after the SQLite work, the
#                 wait until it is durable
#   quorum        of which the proposer's append on the store's runtime: the safekeepers' writes and fsyncs,
#                 a majority's acknowledgement
# Prints a Markdown table for BENCHMARKS.md.
#
#   CAMBIUM_BIN=target/release/cambium scripts/bench-commit-stages.sh
#
# Environment: BENCH_SECONDS (each run's -T, default 10), CAMBIUM_BIN, PG_BIN (as scripts/bench-pgbench.sh).
# The servers run one after the other; each one's data is deleted at the end.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/scripts/clients
seconds=${BENCH_SECONDS:-10}
export CAMBIUM_BIN=${CAMBIUM_BIN:-$root/target/release/cambium}
targets=(main)

say() { echo "bench-commit-stages: $*" >&2; }
die() {
    say "$*"
    exit 1
}
[ -x "$CAMBIUM_BIN" ] || die "no $CAMBIUM_BIN: cargo build --release --bin cambium (or set CAMBIUM_BIN)"
command -v pgbench >/dev/null || die "no pgbench (Debian: apt-get install postgresql-client-15)"

results=$(mktemp "${TMPDIR:-/tmp}/bench-commit-stages.XXXXXX")
trap 'rm -f "$results"' EXIT

# The compute's stage counters as `name value` lines (Cambium only).
stage_counters() {
    curl -sS -H "Authorization: Bearer $api_key" "$api_url/metrics" |
        grep -E '^cambium_compute_(session_|commit)[a-z_]* ' || true
}

# Per-statement averages (µs) of the counters' growth between two scrapes: $1 before, $2 after, $3 statements.
stage_split() {
    python3 - "$1" "$2" "$3" "$4" <<'EOF'
import sys
def load(path):
    return {k: float(v) for k, v in (line.split() for line in open(path) if line.strip())}
before, after, statements, latency_ms = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
d = {k.removeprefix("cambium_compute_"): (after.get(k, 0) - before.get(k, 0)) / statements for k in after}
latency = latency_ms * 1000
run, call = d["session_run_microseconds_total"], d["session_call_microseconds_total"]
sync, quorum = d["commit_sync_microseconds_total"], d["commit_quorum_microseconds_total"]
durable = d.get("session_durable_wait_microseconds_total", 0.0)
print(f"{latency - run:.0f} {run - call:.0f} {call - sync - durable:.0f} {sync + durable:.0f} {quorum:.0f} "
      f"{d['session_calls_total']:.2f} {d['commits_total']:.2f} {durable:.0f}")
EOF
}

run_peer() (
    local peer=$1
    work=$(mktemp -d "${TMPDIR:-/tmp}/bench-commit-stages-$peer.XXXXXX")
    server_pid=""
    pg_stop=""
    stop() {
        # Defined once server.sh is sourced (below); nothing was started before that.
        if declare -F stop_started_server >/dev/null; then
            stop_started_server
        fi
        rm -rf "$work"
    }
    trap stop EXIT
    if [ "$peer" = postgres ]; then
        export CLIENTS_POSTGRES=1
    else
        unset CLIENTS_POSTGRES
    fi
    # shellcheck source=clients/server.sh
    . "$here/server.sh"
    start_server
    create_database bench
    local uri
    uri=$(uri_of main bench)
    psql -X -q -v ON_ERROR_STOP=1 "$uri" -c "CREATE TABLE counters (id integer PRIMARY KEY, n integer)" \
        -c "INSERT INTO counters VALUES (1, 0)" || die "$peer: making the table failed"
    echo "SELECT 1" >"$work/select1.sql"
    echo "SELECT n FROM counters WHERE id = 1" >"$work/select.sql"
    echo "UPDATE counters SET n = n + 1 WHERE id = 1" >"$work/update.sql"
    pgbench -n -c 1 -T 3 -f "$work/update.sql" "$uri" >/dev/null 2>&1 || die "$peer: warming up failed"
    local workload out latency count split
    for workload in select1 select update; do
        say "$peer: $workload, $seconds s"
        out=$work/$workload.out
        [ "$peer" = postgres ] || stage_counters >"$work/before"
        pgbench -n -c 1 -T "$seconds" -f "$work/$workload.sql" "$uri" >"$out" 2>&1 ||
            die "$peer: pgbench $workload failed: $(tail -3 "$out")"
        latency=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$out")
        count=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
        split="- - - - - - - -"
        if [ "$peer" != postgres ]; then
            stage_counters >"$work/after"
            split=$(stage_split "$work/before" "$work/after" "$count" "$latency")
        fi
        echo "$peer $workload $latency $split" >>"$results"
    done
)

say "$seconds s per run, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
run_peer cambium
run_peer postgres

echo
echo "One statement at a time (pgbench -n -c 1 -T $seconds), per statement; $(date -u +'%Y-%m-%d %H:%M UTC')"
echo
echo "| statement | PostgreSQL 15 | Cambium | ratio | wire/session | hand-off | SQLite | commit | of which quorum |"
echo "|---|---|---|---|---|---|---|---|---|"
for workload in select1 select update; do
    read -r _ _ p_lat _ < <(grep "^postgres $workload " "$results")
    read -r _ _ c_lat wire handoff sqlite commit quorum calls commits waited < <(grep "^cambium $workload " "$results")
    ratio=$(python3 -c "print(f'{float(\"$c_lat\") / float(\"$p_lat\"):.2f}')" 2>/dev/null || echo "?")
    echo "| $workload | $p_lat ms | $c_lat ms | $ratio | $wire µs | $handoff µs | $sqlite µs | $commit µs | $quorum µs |"
    say "$workload: $calls session calls and $commits commits per statement; $waited µs waiting for durability after the SQLite work"
done
