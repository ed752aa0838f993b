"""asyncpg against a Cambium database (CLIENTS_URI). asyncpg speaks only the extended protocol with binary
formats, prepares every statement, and introspects the type of every OID it has no codec for with a recursive
query over pg_type (arrays, enums): its first query with an `int[]` parameter failed before its result columns
were typed. Checked: round trips of every type in cases.py as parameters and results, in a typed column and as
`SELECT $1::type`; prepared statements and their described types; executemany; transactions (savepoints,
isolation levels, read-only); cursors; the copy API both ways; errors as asyncpg's exception classes with the
connection usable after them; an enum and arrays introspected; a JSON codec; a pool under concurrent queries;
LISTEN/NOTIFY; a query cancelled by asyncpg's timeout."""

import asyncio
import datetime as dt
import io
import json
import uuid
from decimal import Decimal

import asyncpg

from cases import CASES, JSON_DOCUMENT
from harness import Checks, expect_equal, uri_from_env

URI = uri_from_env()
CONNECT_TIMEOUT_S = 10


async def connect() -> asyncpg.Connection:
    return await asyncpg.connect(URI, timeout=CONNECT_TIMEOUT_S)


def run(coroutine_fn):
    """A check body: `coroutine_fn()` run to its end on a fresh event loop."""
    return lambda: asyncio.run(coroutine_fn())


def all_cases():
    """(name, column type, value sent, value expected back): asyncpg takes and gives JSON as text."""
    yield from CASES
    document = json.dumps(JSON_DOCUMENT)
    yield ("json", "json", document, JSON_DOCUMENT)
    yield ("jsonb", "jsonb", document, JSON_DOCUMENT)


def normalized(column_type: str, value):
    """What asyncpg gives as what cases.py expects: JSON parsed, its own UUID class as the standard one."""
    if value is None:
        return None
    if column_type in ("json", "jsonb"):
        return json.loads(value)
    if column_type == "uuid":
        return uuid.UUID(str(value))
    return value


def round_trip(name: str, column_type: str, sent, want):
    async def body():
        conn = await connect()
        try:
            table = f"rta_{name}"
            await conn.execute(f"DROP TABLE IF EXISTS {table}")
            await conn.execute(f"CREATE TABLE {table} (id serial PRIMARY KEY, v {column_type})")
            row_id = await conn.fetchval(f"INSERT INTO {table} (v) VALUES ($1) RETURNING id", sent)
            expect_equal("RETURNING id", row_id, 1)
            got = await conn.fetchval(f"SELECT v FROM {table} WHERE id = $1", row_id)
            expect_equal(f"{column_type} column read back", normalized(column_type, got), want)
            got = await conn.fetchval(f"SELECT $1::{column_type}", sent)
            expect_equal(f"SELECT $1::{column_type}", normalized(column_type, got), want)
        finally:
            await conn.close()

    return body


async def check_connect():
    conn = await connect()
    try:
        if conn.get_server_version().major < 15:
            raise AssertionError(f"server version {conn.get_server_version()}, want PostgreSQL 15")
        expect_equal("SELECT 1", await conn.fetchval("SELECT 1"), 1)
        row = await conn.fetchrow("SELECT 1::int2 AS a, 2::int8 AS b, 'x'::varchar AS c, true AS d")
        expect_equal("a record's fields by name", (row["a"], row["b"], row["c"], row["d"]), (1, 2, "x", True))
        expect_equal("a record's fields by position", tuple(row), (1, 2, "x", True))
    finally:
        await conn.close()


async def check_arrays_introspected():
    """`= any($1::int[])` and friends: asyncpg introspects each array type before its first use."""
    conn = await connect()
    try:
        await conn.execute("DROP TABLE IF EXISTS arr_a")
        await conn.execute("CREATE TABLE arr_a (id integer PRIMARY KEY, name text, u uuid, n numeric)")
        ids = [uuid.UUID(int=i) for i in range(1, 4)]
        await conn.executemany(
            "INSERT INTO arr_a VALUES ($1, $2, $3, $4)",
            [(i, f"n{i}", ids[i - 1], Decimal(i) / 4) for i in range(1, 4)],
        )
        rows = await conn.fetch("SELECT id FROM arr_a WHERE id = any($1::int[]) ORDER BY id", [1, 3, 9])
        expect_equal("any(int[])", [r["id"] for r in rows], [1, 3])
        rows = await conn.fetch("SELECT id FROM arr_a WHERE name = any($1::text[]) ORDER BY id", ["n2", "zz"])
        expect_equal("any(text[])", [r["id"] for r in rows], [2])
        rows = await conn.fetch("SELECT id FROM arr_a WHERE u = any($1::uuid[]) ORDER BY id", ids[:2])
        expect_equal("any(uuid[])", [r["id"] for r in rows], [1, 2])
        got = await conn.fetchval("SELECT array_agg(n ORDER BY id) FROM arr_a")
        expect_equal("array_agg(numeric)", got, [Decimal("0.25"), Decimal("0.5"), Decimal("0.75")])
    finally:
        await conn.close()


async def check_prepared():
    conn = await connect()
    try:
        await conn.execute("DROP TABLE IF EXISTS prep_a")
        await conn.execute("CREATE TABLE prep_a (id bigint PRIMARY KEY, name text NOT NULL, at timestamptz)")
        await conn.executemany(
            "INSERT INTO prep_a VALUES ($1, $2, $3)",
            [(i, f"name {i}", dt.datetime(2024, 1, i, tzinfo=dt.timezone.utc)) for i in range(1, 6)],
        )
        statement = await conn.prepare("SELECT id, name, at FROM prep_a WHERE id > $1 ORDER BY id")
        described = [(a.name, a.type.name) for a in statement.get_attributes()]
        expect_equal("described columns", described, [("id", "int8"), ("name", "text"), ("at", "timestamptz")])
        expect_equal("described parameters", [p.name for p in statement.get_parameters()], ["int8"])
        expect_equal("ids over 3", [r["id"] for r in await statement.fetch(3)], [4, 5])
        expect_equal("ids over 0", len(await statement.fetch(0)), 5)
        expect_equal("fetchval", await statement.fetchval(4), 5)
        at = await conn.fetchval("SELECT at FROM prep_a WHERE id = $1", 2)
        expect_equal("timestamptz", at, dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc))
    finally:
        await conn.close()


async def check_transactions():
    conn = await connect()
    try:
        await conn.execute("DROP TABLE IF EXISTS tx_a")
        await conn.execute("CREATE TABLE tx_a (id integer PRIMARY KEY)")
        async with conn.transaction():
            await conn.execute("INSERT INTO tx_a VALUES (1)")
            try:
                async with conn.transaction():  # a savepoint
                    await conn.execute("INSERT INTO tx_a VALUES (2)")
                    await conn.execute("INSERT INTO tx_a VALUES (1)")
            except asyncpg.UniqueViolationError:
                pass
            else:
                raise AssertionError("a duplicate key did not raise UniqueViolationError")
        try:
            async with conn.transaction():
                await conn.execute("INSERT INTO tx_a VALUES (3)")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        expect_equal("rows", [r["id"] for r in await conn.fetch("SELECT id FROM tx_a ORDER BY id")], [1])
        for isolation in ("serializable", "repeatable_read", "read_committed"):
            async with conn.transaction(isolation=isolation):
                expect_equal(f"{isolation} read", await conn.fetchval("SELECT count(*) FROM tx_a"), 1)
        try:
            async with conn.transaction(readonly=True):
                await conn.execute("INSERT INTO tx_a VALUES (4)")
        except asyncpg.ReadOnlySQLTransactionError:
            pass
        else:
            raise AssertionError("a write in a read-only transaction did not raise ReadOnlySQLTransactionError")
        expect_equal("after the read-only one", await conn.fetchval("SELECT count(*) FROM tx_a"), 1)
    finally:
        await conn.close()


async def check_cursors():
    conn = await connect()
    try:
        await conn.execute("DROP TABLE IF EXISTS cur_a")
        await conn.execute("CREATE TABLE cur_a AS SELECT g AS id FROM generate_series(1, 250) AS g")
        async with conn.transaction():
            seen = [r["id"] async for r in conn.cursor("SELECT id FROM cur_a ORDER BY id", prefetch=40)]
            expect_equal("an iterated cursor", seen, list(range(1, 251)))
            cursor = await conn.cursor("SELECT id FROM cur_a WHERE id > $1 ORDER BY id", 200)
            expect_equal("fetch(3)", [r["id"] for r in await cursor.fetch(3)], [201, 202, 203])
            await cursor.forward(10)
            expect_equal("fetchrow after forward(10)", (await cursor.fetchrow())["id"], 214)
    finally:
        await conn.close()


async def check_copy():
    conn = await connect()
    try:
        await conn.execute("DROP TABLE IF EXISTS copy_a")
        await conn.execute("CREATE TABLE copy_a (id integer PRIMARY KEY, name text, price numeric, at date)")
        records = [(i, f"item, {i}" if i % 2 else None, Decimal(i) / 8, dt.date(2024, 1, i)) for i in range(1, 21)]
        await conn.copy_records_to_table("copy_a", records=records)
        expect_equal("copied records", await conn.fetchval("SELECT count(*) FROM copy_a"), 20)
        csv_in = io.BytesIO(b'21,"quoted, name",1.5,2024-02-01\n22,,2,2024-02-02\n')
        await conn.copy_to_table("copy_a", source=csv_in, format="csv")
        row = await conn.fetchrow("SELECT name, price, at FROM copy_a WHERE id = 21")
        expect_equal("a CSV row", tuple(row), ("quoted, name", Decimal("1.5"), dt.date(2024, 2, 1)))
        expect_equal("an empty CSV field", await conn.fetchval("SELECT name FROM copy_a WHERE id = 22"), None)
        out = io.BytesIO()
        await conn.copy_from_query("SELECT id, name FROM copy_a WHERE id <= 3 ORDER BY id", output=out, format="csv")
        expect_equal("copy out (query)", out.getvalue(), b'1,"item, 1"\n2,\n3,"item, 3"\n')
        out = io.BytesIO()
        await conn.copy_from_table("copy_a", columns=["id"], output=out, format="text")
        expect_equal("copy out (table)", sorted(int(line) for line in out.getvalue().split()), list(range(1, 23)))
    finally:
        await conn.close()


async def check_errors():
    conn = await connect()
    try:
        await conn.execute("DROP TABLE IF EXISTS err_child")
        await conn.execute("DROP TABLE IF EXISTS err_parent")
        await conn.execute("CREATE TABLE err_parent (id integer PRIMARY KEY)")
        await conn.execute(
            "CREATE TABLE err_child (id integer PRIMARY KEY, parent integer NOT NULL REFERENCES err_parent (id))"
        )
        await conn.execute("INSERT INTO err_parent VALUES (1)")
        expected = [
            ("SELECT 1/0", asyncpg.DivisionByZeroError),
            ("SELECT * FROM err_missing", asyncpg.UndefinedTableError),
            ("SELECT nope FROM err_parent", asyncpg.UndefinedColumnError),
            ("INSERT INTO err_parent VALUES (1)", asyncpg.UniqueViolationError),
            ("INSERT INTO err_child VALUES (1, NULL)", asyncpg.NotNullViolationError),
            ("INSERT INTO err_child VALUES (1, 7)", asyncpg.ForeignKeyViolationError),
            ("SELECT 2147483647::int4 + 1", asyncpg.NumericValueOutOfRangeError),
            ("SELEC 1", asyncpg.PostgresSyntaxError),
        ]
        for sql, error_class in expected:
            try:
                await conn.execute(sql)
            except error_class:
                pass
            except asyncpg.PostgresError as error:
                raise AssertionError(f"{sql}: {type(error).__name__} [{error.sqlstate}], want {error_class.__name__}")
            else:
                raise AssertionError(f"{sql}: no error, want {error_class.__name__}")
            expect_equal(f"the connection after {sql!r}", await conn.fetchval("SELECT 1"), 1)
        try:
            await conn.fetchval("SELECT $1::int", "not a number")
        except asyncpg.DataError:
            pass  # asyncpg checks a parameter against the described type before it sends it
        else:
            raise AssertionError("a str for an int parameter was accepted")
    finally:
        await conn.close()


async def check_enum():
    conn = await connect()
    try:
        await conn.execute("DROP TABLE IF EXISTS enum_a")
        await conn.execute("DROP TYPE IF EXISTS mood_a")
        await conn.execute("CREATE TYPE mood_a AS ENUM ('sad', 'ok', 'happy')")
        await conn.execute("CREATE TABLE enum_a (id integer PRIMARY KEY, mood mood_a)")
        await conn.executemany("INSERT INTO enum_a VALUES ($1, $2)", [(1, "happy"), (2, "sad"), (3, None)])
        rows = await conn.fetch("SELECT id, mood FROM enum_a ORDER BY mood NULLS FIRST, id")
        expect_equal("enum values in the enum's order", [(r["id"], r["mood"]) for r in rows], [(3, None), (2, "sad"), (1, "happy")])
        got = await conn.fetch("SELECT id FROM enum_a WHERE mood = any($1::mood_a[]) ORDER BY id", ["ok", "happy"])
        expect_equal("any(enum[])", [r["id"] for r in got], [1])
        try:
            await conn.execute("INSERT INTO enum_a VALUES (4, $1)", "angry")
        except asyncpg.InvalidTextRepresentationError:
            pass
        else:
            raise AssertionError("a value outside the enum was accepted")
    finally:
        await conn.close()


async def check_json_codec():
    conn = await connect()
    try:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        await conn.execute("DROP TABLE IF EXISTS json_a")
        await conn.execute("CREATE TABLE json_a (id integer PRIMARY KEY, doc jsonb, raw json)")
        await conn.execute("INSERT INTO json_a VALUES (1, $1, $2)", JSON_DOCUMENT, [1, "two"])
        row = await conn.fetchrow("SELECT doc, raw, doc->'c' AS c, doc->>'a' AS a FROM json_a")
        expect_equal("jsonb as a dict", row["doc"], JSON_DOCUMENT)
        expect_equal("json as a list", row["raw"], [1, "two"])
        expect_equal("->", row["c"], {"d": 1.5})
        expect_equal("->>", row["a"], "1")
        got = await conn.fetchval("SELECT id FROM json_a WHERE doc @> $1", {"a": 1})
        expect_equal("@> with a dict parameter", got, 1)
    finally:
        await conn.close()


async def check_pool():
    pool = await asyncpg.create_pool(URI, min_size=2, max_size=4, timeout=CONNECT_TIMEOUT_S)
    try:
        async with pool.acquire() as conn:
            await conn.execute("DROP TABLE IF EXISTS pool_a")
            await conn.execute("CREATE TABLE pool_a (id integer PRIMARY KEY, n integer NOT NULL)")

        async def work(i: int):
            async with pool.acquire() as conn:
                async with conn.transaction():
                    await conn.execute("INSERT INTO pool_a VALUES ($1, $2)", i, i * i)
                return await conn.fetchval("SELECT n FROM pool_a WHERE id = $1", i)

        got = await asyncio.gather(*(work(i) for i in range(40)))
        expect_equal("40 concurrent transactions", got, [i * i for i in range(40)])
        expect_equal("sum", await pool.fetchval("SELECT sum(n) FROM pool_a"), sum(i * i for i in range(40)))
    finally:
        await pool.close()


async def check_listen_notify():
    listener, notifier = await connect(), await connect()
    try:
        received: asyncio.Queue = asyncio.Queue()
        await listener.add_listener("events_a", lambda _conn, _pid, channel, payload: received.put_nowait((channel, payload)))
        await notifier.execute("NOTIFY events_a, 'first'")
        await notifier.execute("SELECT pg_notify('events_a', 'second')")
        got = [await asyncio.wait_for(received.get(), 10) for _ in range(2)]
        expect_equal("notifications", got, [("events_a", "first"), ("events_a", "second")])
    finally:
        await listener.close()
        await notifier.close()


async def check_timeout_cancels():
    conn = await connect()
    try:
        try:
            await conn.execute("SELECT pg_sleep(5)", timeout=0.5)
        except asyncio.TimeoutError:
            pass
        else:
            raise AssertionError("pg_sleep(5) ended within a 0.5 s timeout")
        # asyncpg cancelled the query (a CancelRequest) and the connection goes on.
        expect_equal("after the cancel", await conn.fetchval("SELECT 2"), 2)
    finally:
        await conn.close()


def main() -> None:
    checks = Checks("asyncpg")
    checks.run("connect", run(check_connect))
    for name, column_type, sent, want in all_cases():
        checks.run(f"round_trip.{name}", run(round_trip(name, column_type, sent, want)), needs=("connect",))
    checks.run("arrays_introspected", run(check_arrays_introspected), needs=("connect",))
    checks.run("prepared", run(check_prepared), needs=("connect",))
    checks.run("transactions", run(check_transactions), needs=("connect",))
    checks.run("cursors", run(check_cursors), needs=("connect",))
    checks.run("copy", run(check_copy), needs=("connect",))
    checks.run("errors", run(check_errors), needs=("connect",))
    checks.run("enum", run(check_enum), needs=("connect",))
    checks.run("json_codec", run(check_json_codec), needs=("connect",))
    checks.run("pool", run(check_pool), needs=("connect",))
    checks.run("listen_notify", run(check_listen_notify), needs=("connect",))
    checks.run("timeout_cancels", run(check_timeout_cancels), needs=("connect",))


if __name__ == "__main__":
    main()
