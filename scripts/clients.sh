#!/usr/bin/env bash
# Real PostgreSQL clients against Cambium (issue 11): psql, psycopg 3, psycopg2, asyncpg, SQLAlchemy 2 (on all three),
# Alembic, Django, node-postgres, postgres.js, drizzle (kit and ORM), pg_dump + restore, pgbench, pgcli and pgjdbc, each
# check printed PASS or FAIL with its error, on three targets: a database's default branch (`main`), a branch of it
# (`branch`), and the default branch after a restore to a time before any check wrote (`restored`).
#
# 1. Installs the clients into target/clients only (pinned: scripts/clients/requirements.txt + constraints.txt
#    into a venv from PyPI, scripts/clients/node/package.json + package-lock.json with npm ci, Debian's pgjdbc
#    package with apt-get download and dpkg -x), skipping what is installed already. Needs Python 3.11 + pip,
#    Node 20 + npm, a Java 17 JDK (single-file source launch), apt-get and dpkg, and psql, pg_dump and pgbench 15.
# 2. Starts `cambium up` on free ports in a temporary data directory (stopped on exit), creates a project and,
#    with curl, one empty database per check program (and the extra ones pg_dump and pgbench restore into or fall
#    back on), notes a time, makes a branch of each, runs every program on the main branches, then on the
#    branches, then restores every main branch to the noted time and runs every program again.
# 3. Compares the failures with scripts/clients/expected_failures.txt (scripts/clients/ratchet.py): it exits
#    non-zero if a check not listed fails or a listed one passes, and ends with the summary line
#    `clients: N passed, M expected failures, K unexpected`.
#
# The programs are in scripts/clients/ (one per client; the protocol is in py/harness.py). Their output and
# stderr (tracebacks, the clients' own logs) stay in target/clients/logs/<target>/ after the run.
#
# Environment:
#   CAMBIUM_BIN              the cambium binary (default: target/release/cambium if present, else target/debug/cambium,
#                            under $CARGO_TARGET_DIR when set)
#   CLIENTS_PGBENCH_SECONDS  pgbench's -T (default 30), CLIENTS_PGBENCH_SCALE its -s (default 10)
#   CLIENTS_UPDATE=1         rewrite expected_failures.txt from this run instead of comparing
#   CLIENTS_ONLY="a b"       run only these programs (psql psycopg3 psycopg2 asyncpg sqlalchemy_psycopg sqlalchemy_psycopg2
#                            sqlalchemy_asyncpg alembic django node_pg postgresjs drizzle pg_dump pgbench pgcli jdbc); the
#                            ratchet then ignores the rest
#   CLIENTS_TARGETS="a b"    run only these targets (main branch restored; default all three)
#   CLIENTS_POSTGRES=1       run every program against a throwaway PostgreSQL 15 instead (PG_BIN, default
#                            /usr/lib/postgresql/15/bin), to check the checks: every one must pass there. With
#                            CLIENTS_UPDATE=1 it also remakes scripts/clients/fixtures/postgres15_dump.sql.
#   CLIENTS_DIR              where the clients are installed (default target/clients)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/scripts/clients
clients_dir=${CLIENTS_DIR:-$root/target/clients}
venv=$clients_dir/venv
node_dir=$clients_dir/node
logs=$clients_dir/logs
expected=$here/expected_failures.txt
PROGRAMS=(psql psycopg3 psycopg2 asyncpg sqlalchemy_psycopg sqlalchemy_psycopg2 sqlalchemy_asyncpg alembic django node_pg postgresjs drizzle pg_dump pgbench pgcli jdbc)
# The databases each program uses, in the order it takes them (CLIENTS_URI, CLIENTS_URI2, …).
declare -A SLOTS=(
    [psql]="psql" [psycopg3]="psycopg3" [psycopg2]="psycopg2" [asyncpg]="asyncpg" [sqlalchemy_psycopg]="sqlalchemy_psycopg"
    [sqlalchemy_psycopg2]="sqlalchemy_psycopg2" [alembic]="alembic" [django]="django" [node_pg]="node_pg"
    [postgresjs]="postgresjs" [sqlalchemy_asyncpg]="sqlalchemy_asyncpg" [jdbc]="jdbc"
    [drizzle]="drizzle drizzle_migrate" [pg_dump]="dump_src dump_dst dump_dst_inserts dump_dst_pg15"
    [pgbench]="pgbench pgbench_fallback" [pgcli]="pgcli"
)
PROGRAM_TIMEOUT_S=300

say() { echo "clients: $*" >&2; }
die() {
    say "$*"
    exit 2
}

# ---- 1. the clients, installed into target/clients ----

# A digest of the files an install comes from: the install is redone when they change.
digest_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

install_python() {
    local stamp=$venv/.clients-installed digest
    digest=$(digest_of "$here/requirements.txt" "$here/constraints.txt")
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
        return
    fi
    say "installing the Python clients into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        -r "$here/requirements.txt" -c "$here/constraints.txt"
    echo "$digest" >"$stamp"
}

install_node() {
    local stamp=$node_dir/.clients-installed digest
    digest=$(digest_of "$here/node/package.json" "$here/node/package-lock.json")
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
        return
    fi
    say "installing the Node clients into $node_dir"
    mkdir -p "$node_dir"
    cp "$here/node/package.json" "$here/node/package-lock.json" "$node_dir/"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$digest" >"$stamp"
}

# pgjdbc, Debian's package of it (pinned), its jar extracted into target/clients/jdbc: no system install.
JDBC_PACKAGE=libpostgresql-jdbc-java=42.5.5-0+deb12u1
jdbc_dir=$clients_dir/jdbc
jdbc_jar=$jdbc_dir/usr/share/java/postgresql.jar
install_jdbc() {
    local stamp=$jdbc_dir/.clients-installed
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$JDBC_PACKAGE" ] && [ -f "$jdbc_jar" ]; then
        return
    fi
    say "installing pgjdbc ($JDBC_PACKAGE) into $jdbc_dir"
    rm -rf "$jdbc_dir"
    mkdir -p "$jdbc_dir/deb"
    (cd "$jdbc_dir/deb" && apt-get download "$JDBC_PACKAGE" >/dev/null 2>&1) ||
        die "apt-get download $JDBC_PACKAGE failed"
    dpkg -x "$jdbc_dir"/deb/*.deb "$jdbc_dir"
    [ -f "$jdbc_jar" ] || die "no $jdbc_jar in $JDBC_PACKAGE"
    echo "$JDBC_PACKAGE" >"$stamp"
}

for tool in psql pg_dump pgbench python3 node npm curl java apt-get dpkg; do
    command -v "$tool" >/dev/null || die "no $tool on PATH (see the header of $0 for what this script needs)"
done
for tool in psql pg_dump pgbench; do
    "$tool" --version | grep -q ' 15\.' || die "$tool is not version 15: $("$tool" --version)"
done
mkdir -p "$clients_dir"
# The installers' caches stay under target/clients too.
export PIP_CACHE_DIR=$clients_dir/cache/pip npm_config_cache=$clients_dir/cache/npm
install_python
install_node
install_jdbc

# ---- 2. the server: cambium up (or PostgreSQL 15 with CLIENTS_POSTGRES=1) and its databases ----

work=$(mktemp -d "${TMPDIR:-/tmp}/clients.XXXXXX")
server_pid=""
# shellcheck source=clients/server.sh
. "$here/server.sh"
stop_server() {
    stop_started_server
    rm -rf "$work"
}
trap stop_server EXIT

all_slots() {
    local program
    for program in "${selected_programs[@]}"; do
        echo "${SLOTS[$program]}"
    done | tr ' ' '\n' | sort -u
}

read -r -a selected_programs <<<"${CLIENTS_ONLY:-${PROGRAMS[*]}}"
for program in "${selected_programs[@]}"; do
    [ -n "${SLOTS[$program]:-}" ] || die "CLIENTS_ONLY: unknown program $program (one of: ${PROGRAMS[*]})"
done
if [ -n "${CLIENTS_POSTGRES:-}" ]; then
    targets=(postgres)
else
    read -r -a targets <<<"${CLIENTS_TARGETS:-main branch restored}"
fi
for target in "${targets[@]}"; do
    case $target in main | branch | restored | postgres) ;; *) die "CLIENTS_TARGETS: unknown target $target" ;; esac
done

start_server
say "creating the databases"
for slot in $(all_slots); do
    create_database "$slot"
done
after_databases

# ---- 3. the checks ----

rm -rf "$logs"
mkdir -p "$logs"
results=$work/results.txt
: >"$results"

# The environment a program runs in: the venv's tools first, no bytecode written into scripts/.
export PATH=$venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PGCONNECT_TIMEOUT=10
export PYTHON=$venv/bin/python PGCLI=$venv/bin/pgcli

# A fresh copy of the Node checks in DIR, with the installed node_modules (drizzle-kit writes under it).
node_work() {
    local dir=$1
    mkdir -p "$dir"
    cp -r "$here/node/." "$dir/"
    ln -s "$node_dir/node_modules" "$dir/node_modules"
}

# The command of PROGRAM, run in the directory given.
program_command() {
    local program=$1 dir=$2
    case $program in
    psql) echo "$here/psql.sh" ;;
    pg_dump) echo "$here/pg_dump.sh" ;;
    pgbench) echo "$here/pgbench.sh" ;;
    pgcli) echo "$here/pgcli.sh" ;;
    psycopg3) echo "$PYTHON $here/py/psycopg3_check.py" ;;
    psycopg2) echo "$PYTHON $here/py/psycopg2_check.py" ;;
    asyncpg) echo "$PYTHON $here/py/asyncpg_check.py" ;;
    sqlalchemy_psycopg) echo "$PYTHON $here/py/sqlalchemy_check.py psycopg" ;;
    sqlalchemy_psycopg2) echo "$PYTHON $here/py/sqlalchemy_check.py psycopg2" ;;
    sqlalchemy_asyncpg) echo "$PYTHON $here/py/sqlalchemy_asyncpg_check.py" ;;
    alembic) echo "$PYTHON $here/py/alembic_check.py" ;;
    django) echo "$PYTHON $here/py/django_check.py" ;;
    node_pg) echo "node $dir/pg_check.mjs" ;;
    postgresjs) echo "node $dir/postgresjs_check.mjs" ;;
    drizzle) echo "node $dir/drizzle_check.mjs" ;;
    jdbc) echo "java -cp $jdbc_jar $here/jdbc/JdbcCheck.java" ;;
    esac
}

# Runs PROGRAM on TARGET: its databases' connection strings in CLIENTS_URI, CLIENTS_URI2, …, the server's CA
# certificate in CLIENTS_PG_ROOT_CERT (empty without TLS); its result lines
# printed and collected with the target in front; a crash or a timeout is a failed check `<target>/<program>`.
run_program() {
    local target=$1 program=$2
    local dir=$work/run/$target/$program n=1 slot status timeout_s=$PROGRAM_TIMEOUT_S
    local -a env=() command
    read -r -a command <<<"$(program_command "$program" "$dir")"
    for slot in ${SLOTS[$program]}; do
        local var=CLIENTS_URI
        [ "$n" -gt 1 ] && var=CLIENTS_URI$n
        env+=("$var=$(uri_of "$target" "$slot")")
        n=$((n + 1))
    done
    # The CA certificate of the server's TLS, as a user is given it (node-postgres verifies by default).
    env+=("CLIENTS_PG_ROOT_CERT=$pg_root_cert")
    mkdir -p "$dir" "$logs/$target"
    [[ $program == node_pg || $program == postgresjs || $program == drizzle ]] && node_work "$dir"
    [ "$program" = pgbench ] && timeout_s=$((PROGRAM_TIMEOUT_S + ${CLIENTS_PGBENCH_SECONDS:-30} + 60 * ${CLIENTS_PGBENCH_SCALE:-10}))
    set +e
    (cd "$dir" && env "${env[@]}" timeout "$timeout_s" "${command[@]}") \
        >"$logs/$target/$program.out" 2>"$logs/$target/$program.err"
    status=$?
    set -e
    grep -E '^(PASS|FAIL) ' "$logs/$target/$program.out" | sed -E "s#^(PASS|FAIL) #\1 $target/#" |
        tee -a "$results" || true
    if [ $status -ne 0 ]; then
        local why="exited with $status"
        [ $status -eq 124 ] && why="timed out after ${timeout_s}s"
        echo "FAIL $target/$program: $why: $(tail -2 "$logs/$target/$program.err" | tr '\n' ' ' | cut -c1-300)" |
            tee -a "$results"
    fi
}

started=$SECONDS
for target in "${targets[@]}"; do
    [ "$target" != restored ] || restore_mains
    say "target $target"
    for program in "${selected_programs[@]}"; do
        run_program "$target" "$program"
    done
done
say "checks took $((SECONDS - started)) s; logs in $logs"

# ---- 4. the ratchet ----

if [ -n "${CLIENTS_POSTGRES:-}" ]; then
    failures=$(grep -c '^FAIL ' "$results" || true)
    say "$(grep -c '^PASS ' "$results" || true) passed, $failures failed against PostgreSQL 15"
    [ "$failures" = 0 ] || die "a check that fails on PostgreSQL is wrong: fix it"
    exit 0
fi
partial=()
if [ -n "${CLIENTS_ONLY:-}" ] || [ -n "${CLIENTS_TARGETS:-}" ]; then
    partial=(--partial)
    [ -z "${CLIENTS_UPDATE:-}" ] || die "CLIENTS_UPDATE rewrites the whole list: run it without CLIENTS_ONLY and CLIENTS_TARGETS"
fi
if [ -n "${CLIENTS_UPDATE:-}" ]; then
    python3 "$here/ratchet.py" "$results" "$expected" --update
else
    python3 "$here/ratchet.py" "$results" "$expected" "${partial[@]}"
fi
