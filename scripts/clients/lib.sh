# shellcheck shell=bash
# The check protocol of scripts/clients.sh for the shell checks (as py/harness.py): each check prints one line,
# `PASS <name>` or `FAIL <name>: <error on one line>`. Sourced by the *.sh checks beside it.

# Prints `PASS $1`.
pass() { echo "PASS $1"; }

# Prints `FAIL $1: $2…` with the message on one line, at most 400 characters.
fail() {
    local name=$1
    shift
    local message
    message=$(printf '%s' "$*" | tr '\n\t' '  ' | tr -s ' ' | cut -c1-400)
    echo "FAIL $name: ${message:-failed}"
    FAILED+=("$name")
}

FAILED=()

# True if check $1 failed (or was reported as not run) earlier in this script.
failed() {
    local name
    for name in "${FAILED[@]}"; do
        [ "$name" = "$1" ] && return 0
    done
    return 1
}

# The lines of $1 (a file) that carry an error: psql's `ERROR:`/`FATAL:`, a client's `error:`.
errors_in() { grep -m3 -E '(ERROR|FATAL|PANIC):|error:|Traceback|Exception' "$1" | tr '\n' ' '; }

# psql without ~/.psqlrc, stopping at the first error, quiet: `q URI [psql args…]`.
q() {
    local uri=$1
    shift
    psql -X -q -v ON_ERROR_STOP=1 "$uri" "$@"
}

# On exit: the tail of every output file of the check's work directory $1 to stderr (clients.sh keeps stderr in
# the check's log), then the directory removed.
keep_outputs() {
    tail -n 40 "$1"/*.out >&2 2>/dev/null || true
    rm -rf "$1"
}
