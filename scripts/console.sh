#!/usr/bin/env bash
# The web console (issue 16) in a real headless Chromium, against a fresh `cambium up`: sign in (a wrong key
# refused first), create a project and a database, write rows with the SQL box, fork a branch and see it in the
# branch tree, pick a time in the restore picker, see its preview (tables and row counts then and now, read by
# time travel), restore, see the operation finish in the live list and the kept branch in the tree, query the
# restored branch, select a branch from the keyboard, and fit a phone's width. Every check asserts the DOM;
# screenshots go to target/console/shots/. Prints one PASS/FAIL line per check and `console: N passed, M failed`.
#
# 1. Installs, skipping what is there: Debian's chromium (when no `chromium` is on PATH) into
#    target/console/chromium, unpacked from the packages apt would install (`apt-get download` + `dpkg -x`, no
#    root needed once apt's lists exist; `apt-get update` is run first if they are missing and we are root), and
#    puppeteer-core (pinned: scripts/console/package.json + package-lock.json, `npm ci`) into
#    target/console/node. Needs Node 18+ and npm.
# 2. Starts `cambium up` on free ports in a temporary data directory (stopped on exit) and runs
#    scripts/console/console_check.mjs against it.
#
# Every step is bounded (apt 10 min, npm 5 min, the checks 15 min). When chromium or puppeteer-core cannot be
# downloaded (no network, no apt lists and not root) it prints `console: SKIP: <why>` and exits 0, so CI
# without a network still passes the rest; any other failure exits non-zero.
#
# Environment:
#   CAMBIUM_BIN       the cambium binary (default: target/debug/cambium under $CARGO_TARGET_DIR when set)
#   CONSOLE_CHROMIUM  a Chromium binary to use instead of finding or installing one
#   CONSOLE_DIR       where things are installed and screenshots kept (default target/console)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/scripts/console
dir=${CONSOLE_DIR:-$root/target/console}
say() { echo "console: $*" >&2; }
die() {
    say "$*"
    exit 2
}
skip() {
    say "SKIP: $* (the console's checks did not run)"
    exit 0
}

# ---- 1. chromium and puppeteer-core ----

# Sets `chromium` to the binary to run, and CHROMIUM_LIBS to the libraries of an unpacked one.
chromium=""
CHROMIUM_LIBS=""
resolve_chromium() {
    if [ -n "${CONSOLE_CHROMIUM:-}" ]; then
        chromium=$CONSOLE_CHROMIUM
        return
    fi
    if command -v chromium >/dev/null 2>&1; then
        chromium=$(command -v chromium)
        return
    fi
    local unpacked=$dir/chromium/root
    if [ ! -x "$unpacked/usr/lib/chromium/chromium" ]; then
        install_chromium "$unpacked"
    fi
    # Every directory of the unpacked packages holding a shared library (pulseaudio keeps its own).
    CHROMIUM_LIBS=$(find "$unpacked" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)
    chromium=$unpacked/usr/lib/chromium/chromium
}

# Unpacks chromium and the packages it needs that this machine lacks (what `apt-get install` would add) into $1.
install_chromium() {
    local unpacked=$1 debs=$dir/chromium/debs packages
    command -v apt-get >/dev/null 2>&1 || skip "no chromium on PATH and no apt to download Debian's"
    if ! apt-cache show chromium >/dev/null 2>&1; then
        [ "$(id -u)" = 0 ] || skip "apt knows no chromium package and only root can run apt-get update"
        say "apt-get update (apt's package lists are missing)"
        timeout 600 apt-get update -qq >&2 || skip "apt-get update failed (no network?)"
        apt-cache show chromium >/dev/null 2>&1 || skip "apt knows no chromium package even after apt-get update"
    fi
    packages=$(apt-get install --simulate --no-install-recommends chromium 2>/dev/null | awk '/^Inst /{print $2}')
    [ -n "$packages" ] || die "apt would install nothing for chromium, yet no chromium is on PATH"
    say "unpacking Debian's chromium into $unpacked ($(echo "$packages" | wc -w) packages)"
    # Unpacked beside, then moved into place: an interrupted run leaves no half-unpacked chromium behind.
    rm -rf "$debs" "$unpacked" "$unpacked.partial"
    mkdir -p "$debs" "$unpacked.partial"
    # shellcheck disable=SC2086  # one word per package
    (cd "$debs" && timeout 600 apt-get download $packages >&2) ||
        skip "apt-get download of chromium's $(echo "$packages" | wc -w) packages failed (no network?)"
    local deb
    for deb in "$debs"/*.deb; do
        dpkg -x "$deb" "$unpacked.partial"
    done
    [ -x "$unpacked.partial/usr/lib/chromium/chromium" ] || die "no chromium binary in the unpacked packages"
    mv "$unpacked.partial" "$unpacked"
    rm -rf "$debs"
}

install_node() {
    local node_dir=$dir/node stamp digest
    stamp=$node_dir/.installed
    digest=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
        return
    fi
    say "installing puppeteer-core into $node_dir"
    rm -rf "$node_dir"
    mkdir -p "$node_dir"
    cp "$here/package.json" "$here/package-lock.json" "$node_dir/"
    # puppeteer-core downloads no browser; the cache stays under target/ too.
    if ! (cd "$node_dir" && npm_config_cache=$dir/cache/npm timeout 300 npm ci --no-audit --no-fund --loglevel=error >&2); then
        rm -rf "$node_dir"
        # Skipped only when the registry is out of reach; a registry that answers and an install that fails
        # anyway is a failure.
        timeout 30 npm ping >/dev/null 2>&1 || skip "npm ci of puppeteer-core failed and the npm registry does not answer"
        die "npm ci of puppeteer-core failed"
    fi
    echo "$digest" >"$stamp"
}

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || die "the console's checks need Node 18+ and npm"
mkdir -p "$dir"
resolve_chromium
install_node

# ---- 2. cambium up, and the check ----

bin=${CAMBIUM_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/cambium}
[ -x "$bin" ] || die "no cambium binary at $bin: cargo build --bin cambium, or set CAMBIUM_BIN"
work=$(mktemp -d "${TMPDIR:-/tmp}/console.XXXXXX")
server_pid=""
# shellcheck source=stop-process.sh
. "$root/scripts/stop-process.sh"
stop_server() {
    if [ -n "$server_pid" ]; then
        stop_process "$server_pid"
    fi
    rm -rf "$work"
}
trap stop_server EXIT

"$bin" up --data-dir "$work/cambium" --listen 127.0.0.1:0 --pg-listen 127.0.0.1:0 >"$work/up.out" 2>"$work/up.err" &
server_pid=$!
for _ in $(seq 600); do
    grep -q 'listening on' "$work/up.out" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || die "cambium up exited: $(tail -5 "$work/up.err")"
    sleep 0.1
done
api_url=$(grep -o 'http://[0-9.:]*' "$work/up.out" | head -1)
[ -n "$api_url" ] || die "cambium up did not say where it listens: $(cat "$work/up.out")"
say "cambium up at $api_url, chromium $chromium"

mkdir -p "$dir/shots"
cp "$here/console_check.mjs" "$dir/node/"
CONSOLE_URL=$api_url/console CONSOLE_KEY=$(cat "$work/cambium/api_key") CONSOLE_SHOTS=$dir/shots \
    CONSOLE_CHROMIUM_BIN=$chromium CONSOLE_CHROMIUM_LIBS=$CHROMIUM_LIBS \
    timeout --kill-after=10 900 node "$dir/node/console_check.mjs"
