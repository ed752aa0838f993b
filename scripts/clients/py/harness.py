"""The check protocol of scripts/clients.sh for the Python clients.

Each check is a named function; `Checks.run` calls it and prints exactly one line on stdout:
`PASS <name>` or `FAIL <name>: <error on one line>`. A check that depends on an earlier one that failed is
still printed (as `FAIL <name>: not run: <dependency> failed`), so the set of names does not depend on what
fails, which the ratchet (expected_failures.txt) relies on.
"""

import os
import re
import sys
import traceback

ERROR_CHARS_MAX = 400


def one_line(text: str) -> str:
    """`text` on one line, whitespace collapsed, at most ERROR_CHARS_MAX characters."""
    text = re.sub(r"\s+", " ", str(text)).strip()
    if len(text) > ERROR_CHARS_MAX:
        text = text[: ERROR_CHARS_MAX - 3] + "..."
    return text


def sqlstate_of(error: BaseException) -> str | None:
    """The SQLSTATE of `error` or of an exception it wraps (Django and SQLAlchemy wrap the driver's)."""
    seen = 0
    while error is not None and seen < 10:
        state = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if state:
            return state
        error = getattr(error, "orig", None) or error.__cause__ or error.__context__
        seen += 1
    return None


def describe(error: BaseException) -> str:
    """An exception as `Type [SQLSTATE]: message`, the SQLSTATE when the driver gives one."""
    orig = getattr(error, "orig", None)
    if orig is not None:  # SQLAlchemy: show the driver's error, which carries the server's message
        return describe(orig)
    state = sqlstate_of(error)
    message = str(error) or repr(error)
    name = type(error).__name__
    return f"{name} [{state}]: {message}" if state else f"{name}: {message}"


class Checks:
    """Runs named checks and prints one result line for each (see the module doc)."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.failed: set[str] = set()

    def run(self, name: str, fn, *, needs: tuple[str, ...] = ()) -> bool:
        """Runs `fn()` as check `<prefix>.<name>`; False if it failed or a check in `needs` had."""
        full = f"{self.prefix}.{name}"
        missing = [n for n in needs if f"{self.prefix}.{n}" in self.failed]
        if missing:
            self.failed.add(full)
            print(f"FAIL {full}: not run: {self.prefix}.{missing[0]} failed", flush=True)
            return False
        try:
            fn()
        except BaseException as error:  # noqa: BLE001 - a check reports whatever went wrong
            if isinstance(error, KeyboardInterrupt):
                raise
            self.failed.add(full)
            print(f"FAIL {full}: {one_line(describe(error))}", flush=True)
            # The whole traceback goes to stderr, which clients.sh keeps in the check's log.
            traceback.print_exc(file=sys.stderr)
            return False
        print(f"PASS {full}", flush=True)
        return True


def expect_equal(what: str, got, want) -> None:
    """Raises AssertionError naming `what` unless got == want (and, for want not None, same type)."""
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")
    if want is not None and type(got) is not type(want):
        raise AssertionError(f"{what}: got type {type(got).__name__}, want {type(want).__name__} ({got!r})")


def uri_from_env() -> str:
    """The connection string the check runs against (CLIENTS_URI, with the password)."""
    uri = os.environ.get("CLIENTS_URI")
    if not uri:
        sys.exit("CLIENTS_URI is not set")
    return uri
