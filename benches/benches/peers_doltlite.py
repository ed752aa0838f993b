# The doltlite side of `benches/benches/peers.rs`, written next to its venv and run by it.
#
# doltlite is SQLite with Dolt's version control (`dolt_branch`, `dolt_checkout`, `dolt_commit` as SQL
# functions); `import doltlite` makes the stdlib sqlite3 module load libdoltlite instead of the system SQLite.
# Everything is timed here, with time.perf_counter, and printed as one JSON object on stdout.
#
# usage: python peers_doltlite.py DB_PATH TARGET_BYTES RUNS COMMIT(0|1)
import doltlite  # noqa: F401  (must come before sqlite3)
import json
import os
import sqlite3
import sys
import time

ROW_BYTES = 4096
ROWS_PER_TXN = 16384  # 64 MiB per fill transaction: doltlite commits are slow at size, keep them few


def size_bytes(c):
    return c.execute("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").fetchone()[0]


def build(path, target):
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("CREATE TABLE IF NOT EXISTS blobs (id INTEGER PRIMARY KEY, v BLOB NOT NULL)")
    c.execute("CREATE TABLE IF NOT EXISTS counters (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
    c.execute("INSERT OR IGNORE INTO counters VALUES (1, 0)")
    rows = c.execute("SELECT count(*) FROM blobs").fetchone()[0]
    # doltlite's file is not a b-tree of pages: count the payload, and report the file size too.
    while rows * ROW_BYTES < target:
        n = min(ROWS_PER_TXN, (target - rows * ROW_BYTES + ROW_BYTES - 1) // ROW_BYTES)
        c.execute("BEGIN")
        c.execute(
            "WITH RECURSIVE s(x) AS (SELECT ? UNION ALL SELECT x + 1 FROM s WHERE x < ?) "
            "INSERT INTO blobs (id, v) SELECT x, randomblob(?) FROM s",
            (rows + 1, rows + n, ROW_BYTES),
        )
        c.execute("COMMIT")
        rows += n
        print(f"  doltlite: {rows * ROW_BYTES >> 20} MiB", file=sys.stderr, flush=True)
    c.execute("SELECT dolt_commit('-A', '-m', 'fill')")
    return c, rows


def main():
    path, target, runs, commit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    started = time.perf_counter()
    c, rows = build(path, target)
    out = {
        "sqlite_version": c.execute("SELECT sqlite_version()").fetchone()[0],
        "doltlite_version": doltlite.__version__,
        "rows": rows,
        "payload_bytes": rows * ROW_BYTES,
        "file_bytes": os.path.getsize(path),
        "build_s": time.perf_counter() - started,
        "branch_s": [],
        "checkout_s": [],
        "first_commit_s": [],
        "second_commit_s": [],
        "dolt_commit_s": [],
    }
    tag = str(time.time_ns())
    for i in range(runs + 2):
        name = f"b{tag}_{i}"
        t = time.perf_counter()
        c.execute("SELECT dolt_branch(?)", (name,)).fetchone()
        took = time.perf_counter() - t
        if i >= 2:  # two warm-ups
            out["branch_s"].append(took)
        if commit and i >= 2:
            t = time.perf_counter()
            c.execute("SELECT dolt_checkout(?)", (name,)).fetchone()
            out["checkout_s"].append(time.perf_counter() - t)
            assert c.execute("SELECT active_branch()").fetchone()[0] == name
            for key in ("first_commit_s", "second_commit_s"):
                t = time.perf_counter()
                c.execute("UPDATE counters SET n = n + 1 WHERE id = 1")  # autocommit: one SQL commit
                out[key].append(time.perf_counter() - t)
            t = time.perf_counter()
            c.execute("SELECT dolt_commit('-a', '-m', 'small')").fetchone()
            out["dolt_commit_s"].append(time.perf_counter() - t)
            c.execute("SELECT dolt_checkout('main')").fetchone()
        c.execute("SELECT dolt_branch('-D', ?)", (name,)).fetchone()
    print(json.dumps(out))


main()
