#!/usr/bin/env bash
# pgcli against a Cambium database (CLIENTS_URI): `pgcli -c '\dt'` lists a table the setup made, pgcli fed `\dt`
# on standard input (as in a session) lists it, and pgcli's completion refresh, which a session runs in the
# background (so that whether its errors show before pgcli exits is a race), runs its catalog queries
# synchronously (py/pgcli_completions.py, one check per refresher). Needs PGCLI (the pgcli executable) and
# PYTHON (the venv's python); pgcli's config goes to a temporary directory.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
uri=${CLIENTS_URI:?CLIENTS_URI is not set}
pgcli=${PGCLI:?PGCLI is not set}
python=${PYTHON:?PYTHON is not set}
work=$(mktemp -d)
trap 'keep_outputs "$work"' EXIT
export XDG_CONFIG_HOME=$work/config HOME=$work
PGCLI_TIMEOUT_S=60

if q "$uri" -c 'DROP TABLE IF EXISTS pgcli_t' -c 'CREATE TABLE pgcli_t (id integer PRIMARY KEY, name text)' \
    >"$work/setup.out" 2>&1; then
    pass pgcli.setup
else
    fail pgcli.setup "$(errors_in "$work/setup.out")"
fi

# listed NAME OUTPUT: passes NAME if OUTPUT shows pgcli_t as a table.
listed() {
    local name=$1 out=$2
    if ! grep -qE '\| *public *\| *pgcli_t *\| *table' "$out"; then
        fail "$name" "pgcli_t not listed: $(head -c 300 "$out")"
    else
        pass "$name"
    fi
}

if failed pgcli.setup; then
    fail pgcli.command "not run: pgcli.setup failed"
    fail pgcli.stdin "not run: pgcli.setup failed"
    fail pgcli.completions "not run: pgcli.setup failed"
    exit 0
fi
timeout "$PGCLI_TIMEOUT_S" "$pgcli" --less-chatty -c '\dt' "$uri" >"$work/command.out" 2>&1
status=$?
if [ $status -ne 0 ]; then
    fail pgcli.command "exit $status: $(errors_in "$work/command.out")"
else
    listed pgcli.command "$work/command.out"
fi
printf '%s\n' '\dt' | timeout "$PGCLI_TIMEOUT_S" "$pgcli" --less-chatty "$uri" >"$work/stdin.out" 2>&1
status=$?
if [ $status -ne 0 ]; then
    fail pgcli.stdin "exit $status: $(errors_in "$work/stdin.out")"
else
    listed pgcli.stdin "$work/stdin.out"
fi
"$python" "$(dirname "$0")/py/pgcli_completions.py"
