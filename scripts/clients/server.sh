# shellcheck shell=bash disable=SC2034,SC2154  # shares variables with clients.sh, which sources it
# The server side of scripts/clients.sh, sourced by it: `cambium up` driven over its /v1 API with curl, or, with
# CLIENTS_POSTGRES=1, a throwaway PostgreSQL 15 cluster. Both give the same functions:
#   start_server              start it (clients.sh stops it on exit: server_pid, pg_stop); pg_root_cert is the CA
#                             certificate clients verify the server with (empty: the server has no TLS)
#   create_database SLOT      an empty database for SLOT; its connection string with the password in URI[SLOT]
#   uri_of TARGET SLOT        the connection string of SLOT on TARGET (main, branch, restored, postgres)
#   after_databases           once every database exists: note the restore time, and make a branch of every
#                             database (Cambium only), both before any check writes
#   restore_mains             every default branch restored to the time noted before any check wrote
# Uses clients.sh's `work`, `say`, `die` and `targets`.

declare -A URI BRANCH_URI MAIN_BRANCH DB_ID
API_WAIT=30s

# Stops what start_server started (`server_pid`, `pg_stop`): Ctrl-C's clean stop, then SIGKILL if it has not
# stopped within 30 s. The one stop of clients.sh and the bench scripts that source this file.
# shellcheck source=../stop-process.sh
. "$(dirname "${BASH_SOURCE[0]}")/../stop-process.sh"
stop_started_server() {
    if [ -n "${server_pid:-}" ]; then
        stop_process "$server_pid"
    fi
    if [ -n "${pg_stop:-}" ]; then
        eval "$pg_stop" || true
    fi
}

# A free loopback port (bound and released; another process could take it first, which is unlikely).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Prints the value at PATH (keys joined by dots) of the JSON document on stdin.
json_get() {
    python3 -c '
import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1].split("."):
    value = value[key]
print(value)' "$1"
}

# $2 with the password $1 put in: postgresql://user@host… → postgresql://user:password@host…
with_password() { printf '%s' "$2" | sed "s|^postgresql://\([^:@]*\)@|postgresql://\1:$1@|"; }

if [ -z "${CLIENTS_POSTGRES:-}" ]; then

    cambium_bin() {
        if [ -n "${CAMBIUM_BIN:-}" ]; then
            echo "$CAMBIUM_BIN"
            return
        fi
        local target_dir=${CARGO_TARGET_DIR:-$root/target}
        if [ -x "$target_dir/release/cambium" ]; then
            echo "$target_dir/release/cambium"
        else
            echo "$target_dir/debug/cambium"
        fi
    }

    start_server() {
        local bin
        bin=$(cambium_bin)
        [ -x "$bin" ] || die "no cambium binary at $bin: cargo build --bin cambium, or set CAMBIUM_BIN"
        say "starting $bin up"
        "$bin" up --data-dir "$work/cambium" --listen 127.0.0.1:0 --pg-listen 127.0.0.1:0 --rate-limit 0 \
            >"$work/up.out" 2>"$work/up.err" &
        server_pid=$!
        local _
        for _ in $(seq 600); do
            grep -q 'listening on' "$work/up.out" 2>/dev/null && break
            kill -0 "$server_pid" 2>/dev/null || die "cambium up exited: $(tail -5 "$work/up.err")"
            sleep 0.1
        done
        api_url=$(grep -o 'http://[0-9.:]*' "$work/up.out" | head -1)
        [ -n "$api_url" ] || die "cambium up did not start within 60 s: $(tail -5 "$work/up.err")"
        api_key=$(cat "$work/cambium/api_key")
        # The CA certificate a client verifies the server's self-signed one with, as `cambium up` names it.
        pg_root_cert=$(sed -n 's/.*PostgreSQL TLS certificate (self-signed, for sslrootcert) in //p' "$work/up.out" | head -1)
        [ -f "$pg_root_cert" ] || die "cambium up did not name its PostgreSQL TLS certificate: $(head -1 "$work/up.out")"
        project=$(api POST /v1/projects '{"name":"clients"}' | json_get project.id)
    }

    # api METHOD PATH [BODY]: the response body; dies on a status other than 2xx.
    api() {
        local method=$1 path=$2 body=${3:-} response status
        local -a data=()
        [ -n "$body" ] && data=(-d "$body")
        response=$(curl -sS -X "$method" -H "Authorization: Bearer $api_key" -H 'Content-Type: application/json' \
            -w '\n%{http_code}' "${data[@]}" "$api_url$path") || die "$method $path: curl failed"
        status=${response##*$'\n'}
        response=${response%$'\n'*}
        [[ $status == 2?? ]] || die "$method $path: HTTP $status: $response"
        printf '%s' "$response"
    }

    # Waits for operation $1 to finish; dies if it ends otherwise.
    wait_operation() {
        local operation=$1 status _
        for _ in 1 2 3 4; do
            status=$(api GET "/v1/operations/$operation?wait=$API_WAIT" | json_get operation.status)
            [ "$status" = running ] || break
        done
        [ "$status" = finished ] || die "operation $operation ended $status"
    }

    create_database() {
        local slot=$1 created
        created=$(api POST "/v1/projects/$project/databases" "{\"name\":\"$slot\"}")
        wait_operation "$(printf '%s' "$created" | json_get operation.id)"
        DB_ID[$slot]=$(printf '%s' "$created" | json_get database.id)
        MAIN_BRANCH[$slot]=$(printf '%s' "$created" | json_get database.default_branch_id)
        URI[$slot]=$(printf '%s' "$created" | json_get database.connection_uri)
    }

    # Called once every database exists: notes the restore time, then makes the branches, both before any check.
    after_databases() {
        sleep 1
        restore_time=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
        sleep 1
        [[ " ${targets[*]} " == *" branch "* ]] || return 0
        say "creating a branch of each database"
        local slot branch password
        for slot in "${!URI[@]}"; do
            branch=$(api POST "/v1/databases/${DB_ID[$slot]}/branches" '{"name":"clients"}')
            password=$(printf '%s' "${URI[$slot]}" | sed 's|^postgresql://[^:]*:\([^@]*\)@.*|\1|')
            BRANCH_URI[$slot]=$(with_password "$password" "$(printf '%s' "$branch" | json_get branch.connection_uri)")
        done
    }

    restore_mains() {
        say "restoring each default branch to $restore_time, before any check wrote"
        local slot restore
        for slot in "${!URI[@]}"; do
            restore=$(api POST "/v1/branches/${MAIN_BRANCH[$slot]}/restore" "{\"target_timestamp\":\"$restore_time\"}")
            wait_operation "$(printf '%s' "$restore" | json_get operation.id)"
        done
    }

    uri_of() {
        case $1 in
        branch) echo "${BRANCH_URI[$2]}" ;;
        *) echo "${URI[$2]}" ;;
        esac
    }

else

    start_server() {
        local pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin} tool
        for tool in initdb pg_ctl; do
            [ -x "$pg_bin/$tool" ] || die "no $pg_bin/$tool (Debian: apt-get install postgresql-15)"
        done
        # PostgreSQL refuses to run as root: then the cluster belongs to the `postgres` user.
        local -a as_server=()
        pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/clients-pg.XXXXXX")
        if [ "$(id -u)" = 0 ]; then
            id -u postgres >/dev/null 2>&1 || die "running as root needs a postgres user for PostgreSQL"
            chown postgres "$pg_dir"
            as_server=(runuser -u postgres --)
        fi
        pg_password=$(python3 -c 'import secrets; print(secrets.token_hex(12))')
        pg_port=$(free_port)
        printf '%s\n' "$pg_password" >"$pg_dir/pw"
        [ ${#as_server[@]} -eq 0 ] || chown postgres "$pg_dir/pw"
        say "starting PostgreSQL 15 on port $pg_port"
        "${as_server[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U cambium --auth=scram-sha-256 --pwfile="$pg_dir/pw" \
            -E UTF8 --locale=C.UTF-8 >"$pg_dir/initdb.out" 2>&1 || die "initdb failed: $(tail -3 "$pg_dir/initdb.out")"
        printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\ntimezone = 'UTC'\n" \
            "$pg_port" "$pg_dir" >>"$pg_dir/data/postgresql.conf"
        pg_stop="${as_server[*]} $pg_bin/pg_ctl -D $pg_dir/data -m immediate -w stop >/dev/null 2>&1; rm -rf $pg_dir"
        "${as_server[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w start >/dev/null ||
            die "PostgreSQL did not start: $(tail -5 "$pg_dir/log")"
        if [ -n "${CLIENTS_UPDATE:-}" ]; then
            export CLIENTS_SAVE_DUMP=$here/fixtures/postgres15_dump.sql
        fi
    }

    pg_root_cert=
    create_database() {
        local slot=$1
        URI[$slot]="postgresql://cambium:$pg_password@127.0.0.1:$pg_port/$slot"
        psql -X -q -v ON_ERROR_STOP=1 "postgresql://cambium:$pg_password@127.0.0.1:$pg_port/postgres" \
            -c "CREATE DATABASE $slot" || die "CREATE DATABASE $slot failed"
    }

    after_databases() { :; }
    restore_mains() { :; }
    uri_of() { echo "${URI[$2]}"; }

fi
