#!/usr/bin/env python3
"""The ratchet of scripts/clients.sh: compares a run's results with expected_failures.txt.

A results file has one line per check, `PASS <name>` or `FAIL <name>: <error>`. The expected failures file has
one check a line, `<name> <reason>`, `#` comments and blank lines ignored. The run is good when the failed
checks are exactly the listed ones: a failure not on the list is unexpected (a regression, or a new check that
fails), a listed check that passed or did not run means the list must be updated. `--update` rewrites the list
from the run (keeping the reasons of the checks that stay on it, the error as the reason of new ones).
`--partial` (a subset of the checks ran) ignores the listed checks that did not run.

Prints the failures that do not match and the summary line `clients: N passed, M expected failures, K
unexpected`; exits 1 when something does not match (0 with --update, after rewriting).
"""

import argparse
import re
import sys
from pathlib import Path

REASON_CHARS_MAX = 160
HEADER = """\
# Checks of scripts/clients.sh that fail today, one a line: <target>/<check> <reason>. The script fails when a
# check not listed here fails, or when a listed one passes (or no longer runs): fix the regression, or update the
# list with `CLIENTS_UPDATE=1 scripts/clients.sh` after checking that every change is intended.
"""


def read_results(path: Path) -> dict[str, str | None]:
    """Check name → None if it passed, its error if it failed."""
    results: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        if line.startswith("PASS "):
            results[line[5:].strip()] = None
        elif line.startswith("FAIL "):
            name, _, error = line[5:].partition(": ")
            results[name.strip()] = error.strip() or "failed"
    return results


def read_expected(path: Path) -> dict[str, str]:
    """Listed check name → its reason."""
    expected: dict[str, str] = {}
    if not path.exists():
        return expected
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        expected[name] = reason.strip()
    return expected


def reason_of(error: str) -> str:
    """A failure's error as a reason: ids, ports and numbers that change from run to run made generic."""
    reason = re.sub(r"\b(db|br|proj|op)_[0-9A-Z]{26}\b", r"\1_…", error)
    reason = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:…", reason)
    reason = re.sub(r"/tmp/[^\s'\"]+", "/tmp/…", reason)
    if len(reason) > REASON_CHARS_MAX:
        reason = reason[: REASON_CHARS_MAX - 1] + "…"
    return reason


TARGET_ORDER = {"main": 0, "branch": 1, "restored": 2}


def order(item: tuple[str, object]) -> tuple[str, int, str]:
    """Sorts `<target>/<check>` names by check, then target (main, branch, restored): one check's lines together."""
    target, _, check = item[0].partition("/")
    return (check, TARGET_ORDER.get(target, len(TARGET_ORDER)), target)


def update(path: Path, results: dict[str, str | None], expected: dict[str, str]) -> None:
    failures = {name: error for name, error in results.items() if error is not None}
    lines = [f"{name} {expected.get(name) or reason_of(error)}" for name, error in sorted(failures.items(), key=order)]
    path.write_text(HEADER + "".join(line + "\n" for line in lines))
    added = sorted(set(failures) - set(expected))
    removed = sorted(set(expected) - set(failures))
    print(f"clients: rewrote {path}: {len(failures)} expected failures ({len(added)} added, {len(removed)} removed)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("expected", type=Path)
    parser.add_argument("--update", action="store_true")
    parser.add_argument("--partial", action="store_true")
    args = parser.parse_args()

    results = read_results(args.results)
    expected = read_expected(args.expected)
    if args.update:
        update(args.expected, results, expected)
        return 0

    passed = sorted(name for name, error in results.items() if error is None)
    unexpected = sorted(name for name, error in results.items() if error is not None and name not in expected)
    fixed = sorted(name for name in passed if name in expected)
    missing = [] if args.partial else sorted(name for name in expected if name not in results)
    expected_failures = sum(1 for name, error in results.items() if error is not None and name in expected)

    for name in unexpected:
        print(f"UNEXPECTED FAIL {name}: {results[name]}")
    for name in fixed:
        print(f"UNEXPECTED PASS {name} (listed: {expected[name]})")
    for name in missing:
        print(f"NOT RUN {name} (listed: {expected[name]})")
    if fixed or missing:
        print(f"clients: {len(fixed) + len(missing)} listed checks passed or did not run: after checking them, "
              f"remove them from {args.expected} or rewrite it with `CLIENTS_UPDATE=1 scripts/clients.sh`")
    if unexpected:
        print(f"clients: {len(unexpected)} checks failed that {args.expected} does not list: fix them, or list them "
              f"(CLIENTS_UPDATE=1 scripts/clients.sh) with a reason if the failure is known")
    print(f"clients: {len(passed)} passed, {expected_failures} expected failures, "
          f"{len(unexpected) + len(fixed) + len(missing)} unexpected")
    return 1 if unexpected or fixed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
