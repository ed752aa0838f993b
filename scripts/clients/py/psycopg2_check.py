"""psycopg2 against a Cambium database (CLIENTS_URI): round trips of every type in cases.py as parameters
(psycopg2 interpolates them into the SQL text as literals, with casts) and results, into a typed column and back
and as `SELECT %s`; copy_expert in and out; execute_values; named (server-side) cursors."""

import io
import json
from decimal import Decimal

import psycopg2
import psycopg2.extras

from cases import CASES, JSON_DOCUMENT
from harness import Checks, expect_equal, uri_from_env

URI = uri_from_env()
psycopg2.extras.register_uuid()


def connect():
    return psycopg2.connect(URI, connect_timeout=10)


class Session:
    """A connection that is rolled back and closed on the way out, whatever happened."""

    def __enter__(self):
        self.conn = connect()
        return self.conn

    def __exit__(self, *exc):
        try:
            self.conn.rollback()
        finally:
            self.conn.close()


def normalized(value):
    """psycopg2 returns bytea as memoryview: compare it as bytes."""
    return bytes(value) if isinstance(value, memoryview) else value


def all_cases():
    """(name, column type, value sent, value expected from the column, value expected from `SELECT %s`).

    psycopg2 sends a float as a bare literal (`1.25`, numeric to PostgreSQL, so read back as Decimal) and a Json
    as a quoted literal without a cast (unknown, so text), which is what `SELECT %s` gives back on PostgreSQL.
    """
    for name, column_type, sent, want in CASES:
        yield name, column_type, sent, want, (Decimal(str(sent)) if name == "float" else want)
    json_text = json.dumps(JSON_DOCUMENT)
    yield ("json", "json", psycopg2.extras.Json(JSON_DOCUMENT), JSON_DOCUMENT, json_text)
    yield ("jsonb", "jsonb", psycopg2.extras.Json(JSON_DOCUMENT), JSON_DOCUMENT, json_text)


def round_trip(name: str, column_type: str, sent, want) -> None:
    table = f"rt2_{name}"
    with Session() as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id serial PRIMARY KEY, v {column_type})")
        cur.execute(f"INSERT INTO {table} (v) VALUES (%s) RETURNING id", (sent,))
        row_id = cur.fetchone()[0]
        expect_equal("RETURNING id", row_id, 1)
        cur.execute(f"SELECT v FROM {table} WHERE id = %s", (row_id,))
        expect_equal(f"{column_type} column read back", normalized(cur.fetchone()[0]), want)
        conn.commit()


def select_param(sent, want) -> None:
    with Session() as conn, conn.cursor() as cur:
        cur.execute("SELECT %s", (sent,))
        expect_equal("SELECT of the parameter", normalized(cur.fetchone()[0]), want)


def check_connect() -> None:
    with Session() as conn:
        if conn.server_version < 150000:
            raise AssertionError(f"server_version {conn.server_version}, want PostgreSQL 15")
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            expect_equal("SELECT 1", cur.fetchone()[0], 1)


def check_execute_values() -> None:
    with Session() as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS many2")
        cur.execute("CREATE TABLE many2 (id serial PRIMARY KEY, name text)")
        rows = psycopg2.extras.execute_values(
            cur, "INSERT INTO many2 (name) VALUES %s RETURNING id", [(f"n{i}",) for i in range(50)], fetch=True
        )
        expect_equal("ids returned by execute_values", [r[0] for r in rows], list(range(1, 51)))
        cur.executemany("UPDATE many2 SET name = %s WHERE id = %s", [("x", 1), ("y", 2)])
        cur.execute("SELECT name FROM many2 WHERE id <= 2 ORDER BY id")
        expect_equal("names after executemany", cur.fetchall(), [("x",), ("y",)])
        conn.commit()


def check_named_cursor() -> None:
    with Session() as conn:
        with conn.cursor(name="big2") as cur:
            cur.itersize = 7
            cur.execute("SELECT n FROM generate_series(1, 100) AS g(n)")
            total = sum(row[0] for row in cur)
        expect_equal("sum over a server-side cursor", total, 5050)


def check_dict_cursor() -> None:
    with Session() as conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        cur.execute("SELECT 1 AS a, 'x'::text AS b")
        expect_equal("a RealDictCursor row", dict(cur.fetchone()), {"a": 1, "b": "x"})


COPY_TEXT = "1\ta\t1.5\n2\ttab\\there\t2\n3\t\\N\t-3.25\n"


def check_copy_from() -> None:
    with Session() as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS copy2")
        cur.execute("CREATE TABLE copy2 (id integer PRIMARY KEY, name text, v numeric)")
        cur.copy_expert("COPY copy2 (id, name, v) FROM STDIN", io.StringIO(COPY_TEXT))
        cur.execute("SELECT id, name, v::text FROM copy2 ORDER BY id")
        expect_equal("rows copied in", cur.fetchall(), [(1, "a", "1.5"), (2, "tab\there", "2"), (3, None, "-3.25")])
        conn.commit()


def check_copy_to() -> None:
    with Session() as conn, conn.cursor() as cur:
        out = io.StringIO()
        cur.copy_expert("COPY (SELECT id, name, v FROM copy2 ORDER BY id) TO STDOUT", out)
        expect_equal("text copied out", out.getvalue(), COPY_TEXT)


def main() -> None:
    checks = Checks("psycopg2")
    checks.run("connect", check_connect)
    for name, column_type, sent, want, want_selected in all_cases():
        checks.run(name, lambda: round_trip(name, column_type, sent, want))
        checks.run(f"{name}.select_param", lambda: select_param(sent, want_selected))
    checks.run("execute_values", check_execute_values)
    checks.run("named_cursor", check_named_cursor)
    checks.run("dict_cursor", check_dict_cursor)
    checks.run("copy_from", check_copy_from)
    checks.run("copy_to", check_copy_to, needs=("copy_from",))


if __name__ == "__main__":
    main()
