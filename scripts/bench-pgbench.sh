#!/usr/bin/env bash
# pgbench's standard TPC-B on Cambium and on PostgreSQL 15, side by side in one run on this machine: for each,
# `pgbench -i -s SCALE` into a fresh database, then `pgbench -c 1 -j 1 -T SECONDS` and `pgbench -c 8 -j 2
# -T SECONDS` (simple query mode, as pgbench defaults), and prints a Markdown table of TPS, average latency and
# failed transactions, plus the init time. For BENCHMARKS.md.
#
#   scripts/bench-pgbench.sh
#
# Environment:
#   BENCH_SCALE    pgbench's -s (default 10)
#   BENCH_SECONDS  each run's -T (default 30)
#   CAMBIUM_BIN    the cambium binary (default target/release/cambium; build it with
#                  `cargo build --release --bin cambium`)
#   PG_BIN         PostgreSQL 15's server binaries (default /usr/lib/postgresql/15/bin)
#   BENCH_SSLMODE  the clients' sslmode for both servers (default disable: the PostgreSQL started here has no
#                  certificate, so both are measured without TLS; `prefer` gives Cambium TLS and PostgreSQL
#                  none, which on 2 cores costs Cambium's run the clients' and its own encryption)
#
# The servers run one after the other, never together; each one's data is deleted at the end. Needs psql and
# pgbench 15 (Debian's postgresql-client-15) and the PostgreSQL 15 server (postgresql-15).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/scripts/clients
scale=${BENCH_SCALE:-10}
seconds=${BENCH_SECONDS:-30}
sslmode=${BENCH_SSLMODE:-disable}
export CAMBIUM_BIN=${CAMBIUM_BIN:-$root/target/release/cambium}
targets=(main)

say() { echo "bench-pgbench: $*" >&2; }
die() {
    say "$*"
    exit 1
}
[ -x "$CAMBIUM_BIN" ] || die "no $CAMBIUM_BIN: cargo build --release --bin cambium (or set CAMBIUM_BIN)"
command -v pgbench >/dev/null || die "no pgbench (Debian: apt-get install postgresql-client-15)"

# URI $1 with its sslmode set to the bench's (any sslmode it had replaced).
with_sslmode() {
    local base=${1%%\?*} query=
    [[ $1 != *\?* ]] || query=$(printf '%s' "${1#*\?}" | tr '&' '\n' | { grep -v '^sslmode=' || true; } | paste -sd '&')
    echo "$base?${query:+$query&}sslmode=$sslmode"
}

results=$(mktemp "${TMPDIR:-/tmp}/bench-pgbench.XXXXXX")
trap 'rm -f "$results"' EXIT

# One server's runs, in a subshell of its own (server.sh defines its functions for one kind of server).
run_peer() (
    local peer=$1
    work=$(mktemp -d "${TMPDIR:-/tmp}/bench-pgbench-$peer.XXXXXX")
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
    uri=$(with_sslmode "$(uri_of main bench)")
    say "$peer: pgbench -i -s $scale"
    local started=$SECONDS
    pgbench -i -s "$scale" "$uri" >"$work/init.out" 2>&1 || die "$peer: pgbench -i failed: $(tail -3 "$work/init.out")"
    local init_s=$((SECONDS - started))
    local clients threads out tps latency failed
    for clients in 1 8; do
        threads=$((clients > 1 ? 2 : 1))
        say "$peer: pgbench -c $clients -j $threads -T $seconds"
        out=$work/run-$clients.out
        pgbench -c "$clients" -j "$threads" -T "$seconds" "$uri" >"$out" 2>&1 ||
            die "$peer: pgbench -c $clients failed: $(tail -3 "$out")"
        tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")
        latency=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$out")
        failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
        echo "$peer $clients ${tps:-?} ${latency:-?} ${failed:-?} $init_s" >>"$results"
    done
)

say "scale $scale, $seconds s per run, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
run_peer cambium
run_peer postgres

echo
echo "pgbench TPC-B (simple query mode, sslmode=$sslmode), scale $scale, $seconds s per run; $(date -u +'%Y-%m-%d %H:%M UTC')"
echo
echo "| clients | Cambium TPS | PostgreSQL 15 TPS | ratio | Cambium latency | PostgreSQL latency | failed (Cambium / PG) |"
echo "|---|---|---|---|---|---|---|"
for clients in 1 8; do
    read -r _ _ c_tps c_lat c_failed c_init < <(grep "^cambium $clients " "$results")
    read -r _ _ p_tps p_lat p_failed p_init < <(grep "^postgres $clients " "$results")
    ratio=$(python3 -c "print(f'{float(\"$c_tps\") / float(\"$p_tps\"):.2f}')" 2>/dev/null || echo "?")
    echo "| $clients | $c_tps | $p_tps | $ratio | $c_lat ms | $p_lat ms | $c_failed / $p_failed |"
done
echo
echo "pgbench -i -s $scale: Cambium ${c_init} s, PostgreSQL 15 ${p_init} s"
