"""The values the psycopg checks send as parameters and expect back as results, with their PostgreSQL types."""

import datetime as dt
import uuid
from decimal import Decimal

UTC_PLUS_2 = dt.timezone(dt.timedelta(hours=2))

# name, column type, value sent, value expected back (the JSON cases are filled in by each driver, whose
# wrappers differ: psycopg's Json/Jsonb, psycopg2's Json).
CASES = [
    ("int", "integer", 42, 42),
    ("bigint", "bigint", 2**40 + 3, 2**40 + 3),
    ("float", "double precision", 1.25, 1.25),
    ("text", "text", "h\u00e9llo 'quoted' \\ back\nslash \u20ac", "h\u00e9llo 'quoted' \\ back\nslash \u20ac"),
    ("bytes", "bytea", b"\x00\x01'\\\xff binary", b"\x00\x01'\\\xff binary"),
    ("bool", "boolean", True, True),
    ("none", "integer", None, None),
    ("datetime", "timestamp", dt.datetime(2024, 2, 29, 13, 14, 15, 123456), dt.datetime(2024, 2, 29, 13, 14, 15, 123456)),
    (
        "datetime_tz",
        "timestamptz",
        dt.datetime(2024, 2, 29, 13, 14, 15, 123456, tzinfo=UTC_PLUS_2),
        dt.datetime(2024, 2, 29, 11, 14, 15, 123456, tzinfo=dt.timezone.utc),
    ),
    ("date", "date", dt.date(2024, 2, 29), dt.date(2024, 2, 29)),
    ("time", "time", dt.time(13, 14, 15, 123456), dt.time(13, 14, 15, 123456)),
    ("decimal", "numeric", Decimal("12345.678901"), Decimal("12345.678901")),
    ("uuid", "uuid", uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")),
    ("list_int", "integer[]", [1, 2, 3], [1, 2, 3]),
    ("list_text", "text[]", ["a", "b c", 'q"uote', None], ["a", "b c", 'q"uote', None]),
]

JSON_DOCUMENT = {"a": 1, "b": [True, None, "x"], "c": {"d": 1.5}}
