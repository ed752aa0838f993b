#!/usr/bin/env bash
# psql against a Cambium database (CLIENTS_URI): the describe meta-commands (\l \dt \d t \di \dn \df \du \dv), each
# run on its own and its output checked for what the setup made, \copy of a table to a file and from it, and (last,
# since on failure it leaves the database locked) a psql that quits inside a transaction it wrote in: the next
# session's write must not wait for it.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
uri=${CLIENTS_URI:?CLIENTS_URI is not set}
work=$(mktemp -d)
trap 'keep_outputs "$work"' EXIT

setup() {
    q "$uri" >"$work/setup.out" 2>&1 <<'SQL'
DROP VIEW IF EXISTS ps_v;
DROP TABLE IF EXISTS ps_t;
DROP TABLE IF EXISTS ps_copy;
CREATE TABLE ps_t (id serial PRIMARY KEY, name text NOT NULL, score numeric(6,2), seen timestamptz DEFAULT now());
CREATE INDEX ps_t_name_idx ON ps_t (name);
CREATE VIEW ps_v AS SELECT id, name FROM ps_t WHERE score > 1;
INSERT INTO ps_t (name, score) VALUES ('a', 1.5), ('tab	and "quote"', NULL), ('c,d', 3);
CREATE TABLE ps_copy (id integer PRIMARY KEY, name text, score numeric(6,2));
SQL
}

if setup; then pass psql.setup; else fail psql.setup "$(errors_in "$work/setup.out")"; fi

# meta NAME COMMAND PATTERN…: runs COMMAND, passes if psql succeeds and its output matches every PATTERN.
meta() {
    local name=$1 command=$2
    shift 2
    if failed psql.setup; then
        fail "psql.$name" "not run: psql.setup failed"
        return
    fi
    if ! q "$uri" -c "$command" >"$work/$name.out" 2>&1; then
        fail "psql.$name" "$command: $(errors_in "$work/$name.out")"
        return
    fi
    local pattern
    for pattern in "$@"; do
        if ! grep -qE "$pattern" "$work/$name.out"; then
            fail "psql.$name" "$command: no line matches /$pattern/ in: $(head -c 300 "$work/$name.out")"
            return
        fi
    done
    pass "psql.$name"
}

dbname=$(q "$uri" -Atc 'SELECT current_database()' 2>/dev/null)
meta l '\l' "^ *${dbname:-current_database failed} *\|"
meta dt '\dt' '^ *public *\| *ps_t *\| *table' '^ *public *\| *ps_copy *\| *table'
meta d_t '\d ps_t' 'Table "public\.ps_t"' '^ *id *\| *integer' '^ *score *\| *numeric\(6,2\)' \
    '^ *seen *\| *timestamp with time zone' 'nextval' '"ps_t_pkey" PRIMARY KEY, btree \(id\)' '"ps_t_name_idx" btree \(name\)'
meta di '\di' '^ *public *\| *ps_t_name_idx *\| *index *\|.*\| *ps_t' '^ *public *\| *ps_t_pkey *\| *index'
meta dn '\dn' '^ *public *\|'
meta df '\df' 'List of functions'
meta du '\du' '^ *cambium *\|'
meta dv '\dv' '^ *public *\| *ps_v *\| *view'

# \copy to a file (its bytes checked), and from a file of the same bytes into another table (its rows checked).
COPY_TEXT=$'1\ta\t1.50\n2\ttab\\tand "quote"\t\\N\n3\tc,d\t3.00'
copy_to() {
    q "$uri" -c "\\copy (SELECT id, name, score FROM ps_t ORDER BY id) TO '$work/ps_t.tsv'" >"$work/copy_to.out" 2>&1 ||
        { fail psql.copy_to "$(errors_in "$work/copy_to.out")"; return; }
    if [ "$(cat "$work/ps_t.tsv")" != "$COPY_TEXT" ]; then
        fail psql.copy_to "the file holds $(od -c "$work/ps_t.tsv" | head -5 | tr -s ' '), want $(printf '%s' "$COPY_TEXT" | od -c | head -5 | tr -s ' ')"
        return
    fi
    pass psql.copy_to
}
copy_from() {
    printf '%s\n' "$COPY_TEXT" >"$work/in.tsv"
    q "$uri" -c "\\copy ps_copy FROM '$work/in.tsv'" >"$work/copy_from.out" 2>&1 ||
        { fail psql.copy_from "$(errors_in "$work/copy_from.out")"; return; }
    local got want
    got=$(q "$uri" -Atc "SELECT id, name, score FROM ps_copy ORDER BY id" 2>&1)
    want=$(q "$uri" -Atc "SELECT id, name, score FROM ps_t ORDER BY id" 2>&1)
    if [ "$got" != "$want" ]; then
        fail psql.copy_from "ps_copy holds [$got], want [$want]"
        return
    fi
    pass psql.copy_from
}
if failed psql.setup; then fail psql.copy_to "not run: psql.setup failed"; else copy_to; fi
if failed psql.setup; then fail psql.copy_from "not run: psql.setup failed"; else copy_from; fi

# disconnect_in_transaction: `psql -c BEGIN -c INSERT` ends its session with the transaction open (psql sends
# Terminate, as a client that exits or crashes closes its socket); the server rolls it back, so another session
# writes at once (lock_timeout bounds the wait on PostgreSQL to 3 s; Cambium's own wait for its write lock is 5 s).
disconnect_in_transaction() {
    q "$uri" -c 'BEGIN' -c "INSERT INTO ps_copy VALUES (100, 'left open', 0)" >"$work/open.out" 2>&1 ||
        { fail psql.disconnect_in_transaction "$(errors_in "$work/open.out")"; return; }
    local started_ms=$(($(date +%s%N) / 1000000)) took_ms
    if ! PGOPTIONS='-c lock_timeout=3000' q "$uri" -c "INSERT INTO ps_copy VALUES (101, 'next', 0)" \
        >"$work/next.out" 2>&1; then
        took_ms=$(($(date +%s%N) / 1000000 - started_ms))
        fail psql.disconnect_in_transaction "a write after a session quit inside its transaction, ${took_ms} ms: $(errors_in "$work/next.out")"
        return
    fi
    local rows
    rows=$(q "$uri" -Atc 'SELECT id FROM ps_copy WHERE id >= 100 ORDER BY id' 2>&1)
    if [ "$rows" != 101 ]; then
        fail psql.disconnect_in_transaction "rows [$rows], want only 101: the quit session's insert must be rolled back"
        return
    fi
    pass psql.disconnect_in_transaction
}
if failed psql.setup; then fail psql.disconnect_in_transaction "not run: psql.setup failed"; else disconnect_in_transaction; fi
