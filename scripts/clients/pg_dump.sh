#!/usr/bin/env bash
# pg_dump against Cambium: a database with data (CLIENTS_URI; two tables with a foreign key, an index, a unique
# index, a check constraint, a view; text with tabs, newlines, quotes and backslashes, NULLs, numeric, bytea,
# jsonb, timestamptz, booleans) is dumped with `--schema-only` and in full (plain format, COPY for the data, as
# by default), and the full dump restored with psql into an empty database (CLIENTS_URI2); a second full dump
# with `--inserts` goes into another (CLIENTS_URI3), and a dump of the same seed that PostgreSQL 15's pg_dump made
# from PostgreSQL 15 (fixtures/postgres15_dump.sql: moving a database from PostgreSQL) into a third
# (CLIENTS_URI4). Each restored database is compared with the source: row count and a checksum of every table's
# rows (as psql prints them, ordered by key), the view, and the serial sequence going on after the last id.
#
# CLIENTS_SAVE_DUMP=FILE also writes the full dump to FILE (clients.sh does, against PostgreSQL, to remake the
# fixture).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
src=${CLIENTS_URI:?CLIENTS_URI is not set}
dst=${CLIENTS_URI2:?CLIENTS_URI2 is not set}
dst_inserts=${CLIENTS_URI3:?CLIENTS_URI3 is not set}
dst_fixture=${CLIENTS_URI4:?CLIENTS_URI4 is not set}
fixture=$(dirname "$0")/fixtures/postgres15_dump.sql
work=$(mktemp -d)
trap 'keep_outputs "$work"' EXIT
ITEMS=300
ORDERS=900
TABLES=(dump_items dump_orders)

# The seed's rows, written here rather than with server functions, so that the check is about the dump alone.
seed_sql() {
    cat <<'SQL'
CREATE TABLE dump_items (
    id serial PRIMARY KEY,
    name text NOT NULL,
    price numeric(10,2),
    created timestamptz NOT NULL,
    data jsonb,
    flag boolean,
    raw bytea
);
CREATE UNIQUE INDEX dump_items_name_key ON dump_items (name);
CREATE TABLE dump_orders (
    id bigserial PRIMARY KEY,
    item_id integer NOT NULL REFERENCES dump_items (id),
    qty integer CHECK (qty > 0),
    note text
);
CREATE INDEX dump_orders_item_idx ON dump_orders (item_id);
CREATE VIEW dump_dear AS SELECT id, name FROM dump_items WHERE price > 100;
SQL
    # sq is a single quote; in the names: a tab, a newline, a doubled quote, a backslash, an escaped é.
    awk -v n="$ITEMS" -v sq="'" 'BEGIN {
        for (i = 1; i <= n; i++) {
            name = "item " i
            if (i % 10 == 0) name = name "\twith tab"
            if (i % 15 == 0) name = name "\nand newline"
            if (i % 20 == 0) name = name " q" sq sq "uote \\\\ back \\u00e9"
            price = (i % 9 == 0) ? "NULL" : sprintf("%d.%02d", i, i % 100)
            json = (i % 4 == 0) ? "NULL" : sprintf("%s{\"i\": %d, \"tags\": [\"a\", %d], \"s\": \"x y\"}%s", sq, i, i * 2, sq)
            flag = (i % 3 == 0) ? "NULL" : ((i % 2 == 0) ? "true" : "false")
            created = sprintf("%s2024-01-%02d %02d:%02d:%02d.%06d+00%s", sq, (i % 28) + 1, i % 24, i % 60, (i * 7) % 60, i * 13, sq)
            raw = sprintf("%s\\x%02x00ff%04x%s", sq, i % 256, i, sq)
            printf "INSERT INTO dump_items (name, price, created, data, flag, raw) VALUES (E%s%s%s, %s, %s, %s, %s, %s);\n", sq, name, sq, price, created, json, flag, raw
        }
    }'
    awk -v n="$ORDERS" -v items="$ITEMS" -v sq="'" 'BEGIN {
        for (i = 1; i <= n; i++) {
            note = (i % 3 == 0) ? "NULL" : sprintf("%snote %d%s", sq, i, sq)
            printf "INSERT INTO dump_orders (item_id, qty, note) VALUES (%d, %d, %s);\n", (i % items) + 1, (i % 7) + 1, note
        }
    }'
}

# The first error of a psql run on a file, with the statement it was on: `psql:FILE:LINE: ERROR: …`.
first_error() {
    local out=$1 file=$2 line
    local error
    error=$(grep -m1 -E 'ERROR|FATAL|error:' "$out" | sed 's|^psql:[^:]*/|psql:|')
    line=$(printf '%s' "$error" | sed -n 's/^psql:[^:]*:\([0-9]*\):.*/\1/p')
    if [ -n "$line" ]; then
        echo "$error -- at line $line: $(sed -n "${line}p" "$file" | cut -c1-160)"
    else
        echo "${error:-$(tail -3 "$out")}"
    fi
}

seed_sql >"$work/seed.sql"
if q "$src" --single-transaction -f "$work/seed.sql" >"$work/seed.out" 2>&1; then
    pass pg_dump.seed
else
    fail pg_dump.seed "$(first_error "$work/seed.out" "$work/seed.sql")"
fi

# dump NAME FILE ARGS…: pg_dump of the source with ARGS into FILE, a check NAME.
dump() {
    local name=$1 file=$2
    shift 2
    if failed pg_dump.seed; then
        fail "$name" "not run: pg_dump.seed failed"
        return
    fi
    if ! pg_dump "$@" -f "$file" "$src" >"$work/$name.out" 2>&1; then
        fail "$name" "$(grep -m2 -E 'error:|detail:' "$work/$name.out" || tail -2 "$work/$name.out")"
    elif ! grep -q 'CREATE TABLE public.dump_orders' "$file"; then
        fail "$name" "no CREATE TABLE public.dump_orders in the dump"
    else
        pass "$name"
    fi
}
dump pg_dump.schema_only "$work/schema.sql" --schema-only
dump pg_dump.full "$work/full.sql"
dump pg_dump.full_inserts "$work/inserts.sql" --inserts
if [ -n "${CLIENTS_SAVE_DUMP:-}" ] && ! failed pg_dump.full; then
    # Without psql's \restrict guard (a random key each time, and unknown to psql 15 before 15.14).
    grep -v -E '^\\(un)?restrict ' "$work/full.sql" >"$CLIENTS_SAVE_DUMP"
fi

# restore NAME DUMP FILE URI: psql -f FILE into URI, a check NAME that needs the check DUMP (if not empty).
restore() {
    local name=$1 dump_check=$2 file=$3 uri=$4
    if [ -n "$dump_check" ] && failed "$dump_check"; then
        fail "$name" "not run: $dump_check failed"
    elif q "$uri" -f "$file" >"$work/$name.out" 2>&1; then
        pass "$name"
    else
        fail "$name" "$(first_error "$work/$name.out" "$file")"
    fi
}

# table_digest URI TABLE: `<row count> <sha256 of the rows as psql prints them, ordered by id>`.
table_digest() {
    local uri=$1 table=$2 count sum
    count=$(q "$uri" -Atc "SELECT count(*) FROM $table" 2>&1) || { echo "error: $count"; return; }
    sum=$(q "$uri" -At -F '|' -c "SELECT * FROM $table ORDER BY id" 2>&1 | sha256sum | cut -c1-16)
    echo "$count rows, sha256 $sum"
}

# compare NAME RESTORE_CHECK URI: every table of URI as in the source, and the view there.
compare() {
    local name=$1 restore_check=$2 uri=$3 table want got
    if failed "$restore_check"; then
        fail "$name" "not run: $restore_check failed"
        return
    fi
    if failed pg_dump.seed; then
        fail "$name" "not run: pg_dump.seed failed"
        return
    fi
    for table in "${TABLES[@]}"; do
        want=$(table_digest "$src" "$table")
        got=$(table_digest "$uri" "$table")
        if [ "$want" != "$got" ]; then
            fail "$name" "$table: restored $got, source $want"
            return
        fi
    done
    want=$(q "$src" -Atc 'SELECT count(*) FROM dump_dear' 2>&1)
    got=$(q "$uri" -Atc 'SELECT count(*) FROM dump_dear' 2>&1)
    if [ "$want" != "$got" ]; then
        fail "$name" "view dump_dear: restored [$got], source [$want]"
        return
    fi
    pass "$name"
}

restore pg_dump.restore pg_dump.full "$work/full.sql" "$dst"
compare pg_dump.compare pg_dump.restore "$dst"
# sequence NAME RESTORE_CHECK URI: the serial of dump_items goes on after the last id restored.
sequence() {
    local name=$1 restore_check=$2 uri=$3 next
    if failed "$restore_check"; then
        fail "$name" "not run: $restore_check failed"
        return
    fi
    next=$(q "$uri" -Atc "INSERT INTO dump_items (name, created) VALUES ('after restore', now()) RETURNING id" 2>&1)
    if [ "$next" = "$((ITEMS + 1))" ]; then pass "$name"; else fail "$name" "next id [$next], want $((ITEMS + 1))"; fi
}

sequence pg_dump.sequence pg_dump.restore "$dst"
restore pg_dump.restore_inserts pg_dump.full_inserts "$work/inserts.sql" "$dst_inserts"
compare pg_dump.compare_inserts pg_dump.restore_inserts "$dst_inserts"
restore pg_dump.restore_postgres15 "" "$fixture" "$dst_fixture"
compare pg_dump.compare_postgres15 pg_dump.restore_postgres15 "$dst_fixture"
sequence pg_dump.sequence_postgres15 pg_dump.restore_postgres15 "$dst_fixture"
