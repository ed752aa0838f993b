-- ALTER TABLE … ADD COLUMN forms SQLite's own ADD COLUMN refuses, which migrations write every day: a default
-- evaluated for each existing row (now(), gen_random_uuid()), NOT NULL with such a default, a stored generated
-- column, a UNIQUE column, NOT NULL without a default (refused where rows exist, as PostgreSQL refuses it), on a
-- table other tables reference, inside a transaction block that rolls back; and later rebuilds of a table with a
-- generated column.
CREATE TABLE adc (id int PRIMARY KEY, v text);
CREATE TABLE adc_child (id int PRIMARY KEY, adc_id int REFERENCES adc (id));
INSERT INTO adc VALUES (1, 'a'), (2, 'b');
INSERT INTO adc_child VALUES (10, 1);
CREATE INDEX adc_v ON adc (v);
ALTER TABLE adc ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();
SELECT count(*), count(DISTINCT created_at), bool_and(created_at <= now()) FROM adc;
ALTER TABLE adc ADD COLUMN u uuid DEFAULT gen_random_uuid();
SELECT count(DISTINCT u), count(u) FROM adc;
ALTER TABLE adc ADD COLUMN twice int GENERATED ALWAYS AS (id * 2) STORED;
SELECT id, twice FROM adc ORDER BY id;
INSERT INTO adc (id, v) VALUES (3, 'c');
SELECT id, twice, created_at IS NOT NULL, u IS NOT NULL FROM adc ORDER BY id;
ALTER TABLE adc ADD COLUMN must int NOT NULL;
ALTER TABLE adc ADD COLUMN code text UNIQUE;
ALTER TABLE adc ADD COLUMN code int DEFAULT 1;
INSERT INTO adc (id, v, code) VALUES (4, 'd', 'x');
INSERT INTO adc (id, v, code) VALUES (5, 'e', 'x');
SELECT * FROM adc_child;
SELECT id, v, twice, code FROM adc ORDER BY id;
ALTER TABLE adc ALTER COLUMN v SET NOT NULL;
SELECT id, twice FROM adc ORDER BY id;
CREATE TABLE adc_empty (id int);
ALTER TABLE adc_empty ADD COLUMN must int NOT NULL;
INSERT INTO adc_empty VALUES (1, NULL);
BEGIN;
ALTER TABLE adc ADD COLUMN at2 timestamp DEFAULT localtimestamp;
SELECT count(at2) FROM adc;
ROLLBACK;
SELECT count(*) FROM adc;
ALTER TABLE adc ADD COLUMN at2 int;
SELECT column_name, ordinal_position, column_default, is_generated, generation_expression FROM information_schema.columns WHERE table_name = 'adc' ORDER BY ordinal_position;
CREATE TABLE adc_gen (a int, b int GENERATED ALWAYS AS (a * 2) STORED, c text, d numeric(8,2) GENERATED ALWAYS AS (a / 3.0) STORED, e text GENERATED ALWAYS AS (upper(c)) STORED);
INSERT INTO adc_gen (a, c) VALUES (7, 'x') RETURNING *;
SELECT a.attname, a.attnum, a.attgenerated, a.atthasdef, pg_get_expr(d.adbin, d.adrelid, true) FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = 'adc_gen'::regclass AND a.attnum > 0 AND a.attname IN ('a', 'b', 'c', 'e') ORDER BY a.attnum;
SELECT column_name, ordinal_position, is_generated, generation_expression FROM information_schema.columns WHERE table_name = 'adc_gen' AND column_name <> 'd' ORDER BY ordinal_position;
INSERT INTO adc_gen (a, b) VALUES (1, 2);
UPDATE adc_gen SET a = 8 RETURNING b, d, e;
ALTER TABLE adc ADD COLUMN seq serial;
SELECT id, seq FROM adc ORDER BY id;
INSERT INTO adc (id, v) VALUES (9, 'z') RETURNING id, seq;
SELECT pg_get_serial_sequence('adc', 'seq'), currval('adc_seq_seq');
ALTER TABLE adc ADD COLUMN IF NOT EXISTS seq serial;
ALTER TABLE adc ADD COLUMN IF NOT EXISTS twice int;
ALTER TABLE adc ADD COLUMN IF NOT EXISTS fresh int DEFAULT 3;
ALTER TABLE adc ADD COLUMN seq int;
SELECT count(*), sum(fresh) FROM adc;
