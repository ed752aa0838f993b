-- VACUUM and ANALYZE as clients run them (issue 12, 2026-12-07): pgbench's `vacuum analyze`, ORMs' and cron
-- jobs' plain VACUUM, VACUUM FULL, the option lists, and the errors: inside a transaction block (explicit, or a
-- multi-statement text), a missing table or column, a column list without ANALYZE, an unknown option. A plain
-- VACUUM runs nothing on Cambium (SQLite reuses freed pages itself); the rows read after each one show the data
-- is as it was.
CREATE TABLE items (id int PRIMARY KEY, name text, qty int);
INSERT INTO items SELECT g, 'item ' || g, g % 7 FROM generate_series(1, 200) AS g;
DELETE FROM items WHERE id % 3 = 0;
VACUUM items;
SELECT count(*), sum(qty) FROM items;
vacuum analyze items;
VACUUM ANALYZE items (name, qty);
VACUUM (VERBOSE false, ANALYZE) items;
VACUUM (FREEZE, ANALYZE true) items (qty);
VACUUM FREEZE VERBOSE items;
VACUUM;
ANALYZE;
ANALYZE items;
ANALYSE items (id);
ANALYZE VERBOSE items;
VACUUM FULL items;
SELECT count(*), min(id), max(id) FROM items;
VACUUM (FULL) items;
CREATE VIEW item_names AS SELECT name FROM items;
VACUUM item_names;
ANALYZE item_names;
VACUUM public.items, items;
VACUUM nosuch;
ANALYZE nosuch;
VACUUM items, nosuch;
ANALYZE items (nosuch);
VACUUM items (qty);
VACUUM (bogus) items;
ANALYZE (FULL) items;
BEGIN;
VACUUM items;
ROLLBACK;
BEGIN;
ANALYZE items;
SELECT count(*) FROM items;
COMMIT;
VACUUM items; SELECT 1;
SELECT 1; VACUUM ANALYZE items;
ANALYZE items; SELECT count(*) FROM items;
INSERT INTO items VALUES (1000, 'after', 1);
SELECT id, name, qty FROM items WHERE id >= 199 ORDER BY id;
VACUUM (FULL foo) items;
VACUUM (ANALYZE 2) items;
VACUUM (PARALLEL 2) items;
VACUUM (PARALLEL) items;
VACUUM (INDEX_CLEANUP auto, TRUNCATE off, PROCESS_TOAST 'on', FULL 0) items;
VACUUM (INDEX_CLEANUP maybe) items;
VACUUM (FULL, FULL) items;
SELECT count(*) FROM items;
