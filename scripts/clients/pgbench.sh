#!/usr/bin/env bash
# pgbench against Cambium: `pgbench -i -s SCALE` (client-side generation: COPY, then VACUUM and primary keys) on
# CLIENTS_URI, then the built-in TPC-B-like script, `pgbench -c 8 -j 2 -T SECONDS`, which must end with no failed
# transaction and no aborted client. If the init failed, the run still happens, on CLIENTS_URI2 initialised the
# way that avoids what Cambium lacks most (server-side generation, no VACUUM: `-I dtGp`, scale 1, whose one
# transaction stays under Cambium's commit size), so that it tells about the run itself; its message says so.
#   CLIENTS_PGBENCH_SCALE (default 10), CLIENTS_PGBENCH_SECONDS (default 30)
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
uri=${CLIENTS_URI:?CLIENTS_URI is not set}
fallback_uri=${CLIENTS_URI2:?CLIENTS_URI2 is not set}
scale=${CLIENTS_PGBENCH_SCALE:-10}
seconds=${CLIENTS_PGBENCH_SECONDS:-30}
work=$(mktemp -d)
trap 'keep_outputs "$work"' EXIT
# A bound on each pgbench process: the init's data and the run's duration, with room for a slow machine.
init_timeout_s=$((120 + 60 * scale))
run_timeout_s=$((seconds + 120))

# init URI SCALE ARGS… > output: pgbench -i, then the account rows counted.
init() {
    local target=$1 init_scale=$2 accounts
    shift 2
    timeout "$init_timeout_s" pgbench -i -s "$init_scale" "$@" "$target" >"$work/init.out" 2>&1 || {
        echo "exit $?: $(grep -m2 -E 'error:|detail:' "$work/init.out" || tail -2 "$work/init.out")"
        return 1
    }
    accounts=$(q "$target" -Atc 'SELECT count(*) FROM pgbench_accounts' 2>&1)
    if [ "$accounts" != "$((init_scale * 100000))" ]; then
        echo "pgbench_accounts has [$accounts] rows, want $((init_scale * 100000))"
        return 1
    fi
}

run_on=$uri
note=""
if error=$(init "$uri" "$scale"); then
    pass pgbench.init
else
    fail pgbench.init "$error"
    run_on=$fallback_uri
    if error=$(init "$fallback_uri" 1 -I dtGp); then
        note=" (after the fallback init -I dtGp -s 1, pgbench.init having failed)"
    else
        run_on=""
        note="not run: pgbench.init failed and so did the fallback init -I dtGp -s 1: $error"
    fi
fi

if [ -z "$run_on" ]; then
    fail pgbench.run "$note"
    exit 0
fi
timeout "$run_timeout_s" pgbench -c 8 -j 2 -T "$seconds" --failures-detailed "$run_on" >"$work/run.out" 2>&1
status=$?
processed=$(sed -n 's/^number of transactions actually processed: \([0-9/]*\).*/\1/p' "$work/run.out")
failures=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$work/run.out")
tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/run.out")
if [ $status -eq 0 ] && [ "$failures" = 0 ] && ! grep -q 'aborted' "$work/run.out"; then
    pass pgbench.run
    echo "pgbench.run: $processed transactions, $tps tps$note" >&2
else
    aborted=$(grep -c 'aborted in command' "$work/run.out")
    first=$( (grep -m1 'aborted in command' "$work/run.out" || grep -m1 'error:' "$work/run.out") |
        sed -e 's/^.*aborted in command [0-9]* query [0-9]*: //' -e 's/db_[0-9A-Z]*/db_…/' -e 's/br_[0-9A-Z]*/br_…/')
    fail pgbench.run "$aborted of 8 clients aborted, ${failures:-unknown} transactions failed: ${first:-no error shown};" \
        "exit $status, ${processed:-no} transactions$note"
fi
