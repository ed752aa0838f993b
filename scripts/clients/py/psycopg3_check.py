"""psycopg 3 against a Cambium database (CLIENTS_URI): round trips of every type in cases.py as parameters and
results (into a typed column and back, and `SELECT %s`), in text and in binary format; the copy API; and the
driver features applications lean on (executemany, named cursors, prepared statements, pipeline mode)."""

import psycopg
from psycopg.types.json import Json, Jsonb

from cases import CASES, JSON_DOCUMENT
from harness import Checks, expect_equal, uri_from_env

URI = uri_from_env()


def connect() -> psycopg.Connection:
    return psycopg.connect(URI, connect_timeout=10)


def all_cases():
    """(name, column type, value sent, value expected from the column, value expected from `SELECT %s`).

    psycopg sends a str as type unknown, so a list of str is unknown too, which PostgreSQL resolves to text:
    `SELECT %s` of one gives the array's text form back.
    """
    for name, column_type, sent, want in CASES:
        yield name, column_type, sent, want, ('{a,"b c","q\\"uote",NULL}' if name == "list_text" else want)
    yield ("json", "json", Json(JSON_DOCUMENT), JSON_DOCUMENT, JSON_DOCUMENT)
    yield ("jsonb", "jsonb", Jsonb(JSON_DOCUMENT), JSON_DOCUMENT, JSON_DOCUMENT)


def round_trip(name: str, column_type: str, sent, want, binary: bool) -> None:
    """Inserts `sent` into a `column_type` column and reads it back, as a parameter and a result."""
    table = f"rt3_{name}{'_bin' if binary else ''}"
    placeholder = "%b" if binary else "%t"
    with connect() as conn:
        with conn.cursor(binary=binary) as cur:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
            cur.execute(f"CREATE TABLE {table} (id serial PRIMARY KEY, v {column_type})")
            cur.execute(f"INSERT INTO {table} (v) VALUES ({placeholder}) RETURNING id", (sent,))
            row_id = cur.fetchone()[0]
            expect_equal("RETURNING id", row_id, 1)
            cur.execute(f"SELECT v FROM {table} WHERE id = {placeholder}", (row_id,))
            expect_equal(f"{column_type} column read back", cur.fetchone()[0], want)
        conn.commit()


def select_param(sent, want) -> None:
    """`SELECT %s` of `sent`: the result's type comes from the parameter's (psycopg sends its type OID)."""
    with connect() as conn:
        expect_equal("SELECT of the parameter", conn.execute("SELECT %s", (sent,)).fetchone()[0], want)
        conn.commit()


def check_connect() -> None:
    with connect() as conn:
        version = conn.info.server_version
        if version < 150000:
            raise AssertionError(f"server_version {version}, want PostgreSQL 15")
        expect_equal("SELECT 1", conn.execute("SELECT 1").fetchone()[0], 1)


def check_transaction() -> None:
    with connect() as conn:
        conn.execute("DROP TABLE IF EXISTS tx3")
        conn.execute("CREATE TABLE tx3 (id integer PRIMARY KEY)")
        conn.commit()
        conn.execute("INSERT INTO tx3 VALUES (1)")
        conn.rollback()
        with conn.transaction():
            conn.execute("INSERT INTO tx3 VALUES (2)")
            with conn.transaction():  # a savepoint
                conn.execute("INSERT INTO tx3 VALUES (3)")
        try:
            with conn.transaction():
                conn.execute("INSERT INTO tx3 VALUES (2)")
        except psycopg.errors.UniqueViolation:
            pass
        else:
            raise AssertionError("a duplicate key did not raise UniqueViolation")
        rows = conn.execute("SELECT id FROM tx3 ORDER BY id").fetchall()
        expect_equal("rows after commit, rollback and savepoints", rows, [(2,), (3,)])
        conn.commit()


def check_executemany() -> None:
    with connect() as conn:
        conn.execute("DROP TABLE IF EXISTS many3")
        conn.execute("CREATE TABLE many3 (id serial PRIMARY KEY, name text)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO many3 (name) VALUES (%s) RETURNING id", [(f"n{i}",) for i in range(50)],
                            returning=True)
            ids = []
            while True:
                ids.append(cur.fetchone()[0])
                if not cur.nextset():
                    break
        expect_equal("ids returned by executemany", ids, list(range(1, 51)))
        conn.commit()


def check_named_cursor() -> None:
    with connect() as conn:
        with conn.cursor(name="big3") as cur:
            cur.itersize = 7
            cur.execute("SELECT n FROM generate_series(1, 100) AS g(n)")
            total = sum(row[0] for row in cur)
        expect_equal("sum over a server-side cursor", total, 5050)
        conn.commit()


def check_prepared() -> None:
    with connect() as conn:
        for i in range(8):  # prepare=True prepares it once; later executions reuse the prepared statement
            got = conn.execute("SELECT %s::int + 1", (i,), prepare=True).fetchone()[0]
            expect_equal(f"prepared statement run {i}", got, i + 1)
        conn.commit()


def check_pipeline() -> None:
    with connect() as conn:
        conn.execute("DROP TABLE IF EXISTS pipe3")
        conn.execute("CREATE TABLE pipe3 (id integer PRIMARY KEY)")
        conn.commit()
        with conn.pipeline():
            for i in range(20):
                conn.execute("INSERT INTO pipe3 VALUES (%s)", (i,))
            count = conn.execute("SELECT count(*) FROM pipe3")
        expect_equal("rows inserted in pipeline mode", count.fetchone()[0], 20)
        conn.commit()


COPY_ROWS = [(1, "a", "1.5"), (2, "tab\there", "2"), (3, None, "-3.25")]


def check_copy_from() -> None:
    with connect() as conn:
        conn.execute("DROP TABLE IF EXISTS copy3")
        conn.execute("CREATE TABLE copy3 (id integer PRIMARY KEY, name text, v numeric)")
        with conn.cursor() as cur:
            with cur.copy("COPY copy3 (id, name, v) FROM STDIN") as copy:
                for row in COPY_ROWS:
                    copy.write_row(row)
            rows = cur.execute("SELECT id, name, v::text FROM copy3 ORDER BY id").fetchall()
        expect_equal("rows copied in", rows, COPY_ROWS)
        conn.commit()


def check_copy_to() -> None:
    with connect() as conn:
        with conn.cursor() as cur:
            with cur.copy("COPY (SELECT id, name, v FROM copy3 ORDER BY id) TO STDOUT") as copy:
                rows = [tuple(row) for row in copy.rows()]  # no set_types: every field as text
        want = [tuple(None if v is None else str(v) for v in row) for row in COPY_ROWS]
        expect_equal("rows copied out", rows, want)
        conn.commit()


def check_copy_binary() -> None:
    with connect() as conn:
        conn.execute("DROP TABLE IF EXISTS copyb3")
        conn.execute("CREATE TABLE copyb3 (id integer PRIMARY KEY, name text)")
        with conn.cursor() as cur:
            with cur.copy("COPY copyb3 (id, name) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "text"])
                copy.write_row((1, "one"))
                copy.write_row((2, "two"))
            with cur.copy("COPY copyb3 (id, name) TO STDOUT (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "text"])
                rows = sorted(copy.rows())
        expect_equal("rows copied in and out in binary", rows, [(1, "one"), (2, "two")])
        conn.commit()


def main() -> None:
    checks = Checks("psycopg3")
    checks.run("connect", check_connect)
    for name, column_type, sent, want, want_selected in all_cases():
        checks.run(name, lambda: round_trip(name, column_type, sent, want, binary=False))
        checks.run(f"{name}.binary", lambda: round_trip(name, column_type, sent, want, binary=True))
        checks.run(f"{name}.select_param", lambda: select_param(sent, want_selected))
    checks.run("transaction", check_transaction)
    checks.run("executemany", check_executemany)
    checks.run("named_cursor", check_named_cursor)
    checks.run("prepared", check_prepared)
    checks.run("pipeline", check_pipeline)
    checks.run("copy_from", check_copy_from)
    checks.run("copy_to", check_copy_to, needs=("copy_from",))
    checks.run("copy_binary", check_copy_binary)


if __name__ == "__main__":
    main()
