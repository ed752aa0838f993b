#!/usr/bin/env bash
# Records the outcomes of the differential corpus (tests/pgdiff/corpus/*.sql) from a real PostgreSQL 15 into
# tests/pgdiff/expected/*.json: initdb a throwaway cluster under the cargo target directory (trust auth, UTF8,
# C.UTF-8, TimeZone UTC, superuser named `cambium` like Cambium's role), start it on a free port with its
# unix socket in that directory (no TCP listener), run `tests/pg_differential.rs` in record mode against it,
# then stop the server and remove the directory, also on failure.
#
# PostgreSQL refuses to run as root: as root the cluster is made and run by the `postgres` user if there is
# one, else by a `pgdiff` system user created here.
#
# Usage: scripts/pgdiff-record.sh
#   PG_BIN             the PostgreSQL 15 binaries (default /usr/lib/postgresql/15/bin)
#   PGDIFF_FILTER      record only the corpus files whose name contains this
#   PGDIFF_BUILD_LOCK  a lock file to hold (flock) while building the test, on machines that share one
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
target=${CARGO_TARGET_DIR:-$root/target}

for tool in initdb postgres pg_ctl; do
    if [ ! -x "$pg_bin/$tool" ]; then
        echo "pgdiff-record: no $pg_bin/$tool (Debian: apt-get install postgresql-15)" >&2
        exit 1
    fi
done
if ! "$pg_bin/postgres" --version | grep -q ' 15\.'; then
    echo "pgdiff-record: $pg_bin/postgres is not PostgreSQL 15: $("$pg_bin/postgres" --version)" >&2
    exit 1
fi

# Who runs the server: ourselves, or an unprivileged user when we are root.
as_server=()
if [ "$(id -u)" = 0 ]; then
    if id -u postgres >/dev/null 2>&1; then
        server_user=postgres
    else
        server_user=pgdiff
        if ! id -u "$server_user" >/dev/null 2>&1; then
            useradd --system --no-create-home --shell /usr/sbin/nologin "$server_user"
        fi
    fi
    as_server=(runuser -u "$server_user" --)
fi

mkdir -p "$target"
dir=$(mktemp -d "$target/pgdiff-pg.XXXXXX")
data="$dir/data"
cleanup() {
    if [ -f "$data/postmaster.pid" ]; then
        "${as_server[@]}" "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
if [ ${#as_server[@]} -gt 0 ]; then
    chown "$server_user" "$dir"
    # The server user must reach the directory: every parent needs search permission for it.
    if ! "${as_server[@]}" test -w "$dir"; then
        echo "pgdiff-record: $server_user cannot reach $dir (check the permissions of its parents)" >&2
        exit 1
    fi
fi

# A free port (the socket lives in our own directory, so only its name depends on the port; still, pick one
# no other server on this machine uses, so that its lock file never collides).
port=""
for _ in $(seq 1 50); do
    candidate=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null && [ ! -e "/tmp/.s.PGSQL.$candidate" ]; then
        port=$candidate
        break
    fi
done
if [ -z "$port" ]; then
    echo "pgdiff-record: no free port found" >&2
    exit 1
fi

"${as_server[@]}" "$pg_bin/initdb" -D "$data" -U cambium --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
    >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
"${as_server[@]}" "$pg_bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start -o \
    "-c listen_addresses='' -c unix_socket_directories='$dir' -p $port -c timezone=UTC -c fsync=off \
     -c max_prepared_transactions=0 -c lc_messages=C" \
    >/dev/null || { cat "$dir/server.log" >&2; exit 1; }

# tokio-postgres takes a unix socket directory as the host (percent-encoded in a URL).
host=$(printf '%s' "$dir" | sed 's|/|%2F|g')
export PGDIFF_RECORD_URL="postgresql://cambium@$host:$port/postgres"
cd "$root"
if [ -n "${PGDIFF_BUILD_LOCK:-}" ]; then
    # A machine whose builds share a lock file: build under it, run without it.
    flock "$PGDIFF_BUILD_LOCK" cargo test --test pg_differential --no-run
fi
cargo test --test pg_differential -- --nocapture cambium_answers_like_postgresql_15
echo "pgdiff-record: wrote $root/tests/pgdiff/expected/ from $("$pg_bin/postgres" --version)"
