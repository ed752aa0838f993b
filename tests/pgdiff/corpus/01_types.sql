-- Types and how PostgreSQL prints them in text format: literals, casts, columns of every common type, and
-- the values an application reads back. (Issue 11, point 2.)

SELECT 1;
SELECT 1 AS one, 'two' AS two, NULL AS nothing;
SELECT 32767::int2, (-32768)::smallint;
SELECT 2147483647::int4, (-2147483648)::integer;
SELECT 9223372036854775807::int8, (-9223372036854775808)::bigint;
SELECT pg_typeof(1), pg_typeof(2147483648), pg_typeof(1.5), pg_typeof('a'::text);
SELECT 7 / 2, 7 % 3, -7 / 2, 7.0 / 2;
SELECT 1.10::numeric, 0.1 + 0.2, 123.4500::numeric(10,2);
SELECT 12345678901234567890.123456789::numeric * 10;
SELECT round(2.5), round(-2.5), round(2.345, 2), trunc(2.789, 1);
SELECT 1::numeric / 3;
SELECT 10::numeric(5,1) / 4;
SELECT 1.5::float8, 0.1::float8 + 0.2::float8, 1e100::float8, 3.0::float8;
SELECT 1.5::float4, 0.1::real, 16777217::float4;
SELECT 'NaN'::float8, 'Infinity'::float8, '-Infinity'::float8;
SELECT 1e-7::float8, 123456789012345678::float8;
SELECT true, false, NULL::boolean;
SELECT 't'::boolean, 'yes'::boolean, 'off'::boolean, '0'::boolean;
SELECT 1 = 1, 1 < 0, true AND NULL, true OR NULL;
SELECT NOT true, true IS TRUE, NULL IS UNKNOWN;
SELECT 'hello'::text, 'hello'::varchar(10), 'hi'::char(5), length('hi'::char(5));
SELECT 'abc'::varchar(2), 'abcdef'::char(3);
SELECT 'a' || 'b' || 1 || true;
SELECT '\x0102ff'::bytea, 'abc'::bytea, decode('68656c6c6f', 'hex');
SELECT encode('hello'::bytea, 'hex'), encode('hello'::bytea, 'base64'), length('\x0102'::bytea);
SELECT '2024-01-02'::date, DATE '2024-02-29', CAST('2024-01-02' AS date);
SELECT '13:45:07'::time, TIME '23:59:59.123456', '01:02'::time;
SELECT '2024-01-02 03:04:05'::timestamp, TIMESTAMP '2024-01-02 03:04:05.678';
SELECT '2024-01-02 03:04:05+02'::timestamptz, TIMESTAMPTZ '2024-06-30 23:00:00-05';
SELECT '2024-01-02 03:04:05'::timestamp with time zone;
SELECT '1 day'::interval, '2 hours 30 minutes'::interval, '1 year 2 months 3 days'::interval;
SELECT INTERVAL '90 minutes', '-1 day'::interval, '1.5 seconds'::interval;
SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid;
SELECT '{"b": 1, "a": [1, 2, {"c": null}]}'::json;
SELECT '{"b": 1, "a": [1, 2, {"c": null}]}'::jsonb;
SELECT '{"a":1,"a":2}'::jsonb, '[1,  2,3]'::jsonb, '"x"'::jsonb, 'null'::jsonb;
SELECT ARRAY[1, 2, 3], ARRAY['a', 'b c', NULL], '{1,2,3}'::int[];
SELECT ARRAY[[1, 2], [3, 4]], ARRAY[]::text[], ARRAY[1.5, 2]::numeric[];
SELECT ARRAY[true, false], ARRAY['2024-01-02'::date], ARRAY['"q"', 'back\slash'];
SELECT CAST(42 AS text), CAST('42' AS integer), '42'::bigint + 1, CAST(3.9 AS integer);
SELECT 4.5::int, (-4.5)::int, 2.5::int2;
SELECT CAST('3.14' AS numeric(4,1)), CAST(1 AS boolean), CAST(true AS integer);
SELECT 1::text::int + 1, '  12  '::int, '+7'::int;
CREATE TABLE typed (
    id integer PRIMARY KEY,
    small smallint,
    big bigint,
    exact numeric(12, 3),
    money_like numeric,
    approx double precision,
    single real,
    flag boolean,
    label varchar(8),
    code char(4),
    body text,
    raw bytea,
    day date,
    at_time time,
    at timestamp,
    at_tz timestamptz,
    span interval,
    uid uuid,
    doc json,
    docb jsonb,
    tags text[],
    scores integer[]
);
INSERT INTO typed VALUES (1, 1, 10000000000, 1.5, 0.1, 0.5, 0.25, true, 'abc', 'ab', 'text', '\xdeadbeef',
    '2024-03-01', '12:00', '2024-03-01 12:00:00', '2024-03-01 12:00:00+00', '1 day 2 hours',
    '00000000-0000-0000-0000-000000000001', '{"k": "v"}', '{"k": "v", "n": 1}', '{a,b}', '{1,2,3}');
INSERT INTO typed (id, exact, approx, flag, code, at_tz, span) VALUES (2, 2, 1e-3, false, 'x', '2024-03-01 12:00:00+05', '-3 days');
INSERT INTO typed (id) VALUES (3);
SELECT * FROM typed ORDER BY id;
SELECT id, flag, NOT flag AS negated FROM typed ORDER BY id;
SELECT id, exact * 2, exact + money_like, approx * 2 FROM typed WHERE id <= 2 ORDER BY id;
SELECT id, code, length(code), code || '|', label || '|' FROM typed WHERE code IS NOT NULL ORDER BY id;
SELECT id FROM typed WHERE flag ORDER BY id;
SELECT id FROM typed WHERE flag = 't' ORDER BY id;
SELECT id FROM typed WHERE flag IS NOT TRUE ORDER BY id;
SELECT id, at_tz, at_tz::date, at::time FROM typed WHERE at_tz IS NOT NULL ORDER BY id;
SELECT count(*), sum(exact), avg(exact), min(approx), max(approx), bool_and(flag), bool_or(flag) FROM typed;
SELECT sum(small), sum(big), avg(small), pg_typeof(sum(small)), pg_typeof(sum(big)), pg_typeof(avg(small)) FROM typed;
SELECT pg_typeof(exact), pg_typeof(flag), pg_typeof(uid), pg_typeof(docb), pg_typeof(tags), pg_typeof(span) FROM typed WHERE id = 1;
SELECT uid = '00000000-0000-0000-0000-000000000001' FROM typed WHERE id = 1;
SELECT raw, length(raw), substring(raw from 2 for 2) FROM typed WHERE id = 1;
UPDATE typed SET exact = exact + 0.0005 WHERE id = 1 RETURNING exact;
UPDATE typed SET label = 'toolongvalue' WHERE id = 1;
INSERT INTO typed (id, small) VALUES (4, 40000);
INSERT INTO typed (id, uid) VALUES (5, 'not-a-uuid');
INSERT INTO typed (id, day) VALUES (6, '2024-02-30');
INSERT INTO typed (id, docb) VALUES (7, '{bad json');
INSERT INTO typed (id, flag) VALUES (8, 'maybe');
SELECT 'abc'::integer;
SELECT ''::integer;
SELECT '1.5'::integer;
SELECT 1::bit(3), B'101' | B'010';
SELECT '(1,2)'::point;
SELECT 100::money;
SELECT 'on'::boolean::text, 12::smallint::text, 1.50::numeric::text, '1 day'::interval::text;
SELECT 3 = 3.0, 1 = '1', 'a' < 'b', 'B' < 'a';
SELECT greatest(1, 2.5, 2), least('b', 'a', 'c'), coalesce(NULL, NULL, 3), nullif(1, 1);
SELECT CASE WHEN 1 > 0 THEN 'pos' ELSE 'neg' END, CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' END;
SELECT 10 IN (1, 10), 5 NOT IN (1, 2), 3 BETWEEN 1 AND 5, NULL IN (1), 1 IN (NULL, 1);
SELECT 1 IS DISTINCT FROM NULL, NULL IS NOT DISTINCT FROM NULL, NULL = NULL;
SELECT abs(-5), sign(-3), mod(10, 3), power(2, 10), sqrt(16), ceil(1.2), floor(-1.2);
SELECT 2 ^ 3, |/ 25, factorial(5), @ -5, 7 & 3, 7 | 8, 1 << 4, 256 >> 2, 5 # 1;
SELECT exp(0), ln(1), log(100), log(2, 8), pi();
SELECT to_char(1234567.891, 'FM9,999,999.00'), to_number('1,234.5', '9G999D9');
SELECT width_bucket(5, 0, 10, 5), div(7, 2), gcd(12, 18), lcm(4, 6);
-- Appended (issue 11, point 3): values applications read and write every day.
SELECT 1.005::numeric(5,2), 123.456::numeric(6,1), 0.5::numeric(3,0), -0.5::numeric(3,0);
SELECT 'NaN'::numeric, 'NaN'::numeric = 'NaN'::numeric, '-0'::float8, 0.1::float4 + 0.2::float4;
SELECT 10 / 4, 10 / 4.0, 10::float8 / 4, 10 % 4, -10 % 4, 2.5 * 2, 7::numeric / 7;
SELECT true::int, 1::bool, 0::boolean, 'TRUE'::boolean AND 'f'::boolean, NOT 'no'::boolean;
SELECT '\x00ff'::bytea || '\x01'::bytea, length('\x0001'::bytea), octet_length('abc'::bytea);
SELECT 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid;
SELECT gen_random_uuid() IS NOT NULL, length(gen_random_uuid()::text);
SELECT CAST('2024-01-01' AS timestamp), CAST('12.50' AS numeric(6,2)), CAST(12.5 AS int), CAST('7' AS smallint);
SELECT 9223372036854775807::bigint = 9223372036854775807, 2147483647::int + 0, (-32768)::int2 - 0::int2;
SELECT coalesce(NULL, 1, 2), nullif(1, 1), nullif(1, 2), greatest(1, 3, 2), least('b', 'a', 'c');
SELECT CASE WHEN 1 > 2 THEN 'x' WHEN 2 > 1 THEN 'y' END, CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE 'many' END;
CREATE TABLE amounts (id int PRIMARY KEY, price numeric(10,2) NOT NULL, qty int NOT NULL, rate real, ratio double precision);
INSERT INTO amounts VALUES (1, 9.99, 3, 0.5, 0.25), (2, 100, 1, 1.5, 2.5), (3, 0.10, 10, NULL, NULL);
SELECT id, price * qty AS total, round(price * qty * 1.08, 2) AS with_tax FROM amounts ORDER BY id;
SELECT sum(price * qty), avg(price), max(price), min(qty), sum(rate), avg(ratio) FROM amounts;
SELECT id FROM amounts WHERE price > 5 AND qty >= 1 ORDER BY price DESC;
SELECT id, price FROM amounts ORDER BY price;
UPDATE amounts SET price = price * 1.1 WHERE id = 1 RETURNING price;
SELECT pg_typeof(price * qty), pg_typeof(rate * 2), pg_typeof(ratio + 1), pg_typeof(qty / 2) FROM amounts WHERE id = 1;
