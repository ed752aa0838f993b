-- What the dialect layer learned this session, against PostgreSQL 15: DateStyle's field order when dates are
-- read, PREPARE with declared parameter types and the pg_prepared_statements / pg_cursors views, EXISTS over an
-- empty select list, pseudo-type names, SQL functions, CTE column names, a set-returning grouping key.

SET DateStyle = 'ISO, MDY';
SELECT '01/02/2024'::date;
SET DateStyle = 'ISO, DMY';
SELECT '01/02/2024'::date;
SELECT '13/02/2024'::date;
SET DateStyle = 'ISO, YMD';
SELECT '2024-02-01'::date;
RESET DateStyle;

CREATE TABLE so_items (id int PRIMARY KEY, name text NOT NULL, price numeric(8,2));
INSERT INTO so_items VALUES (1, 'apple', 1.50), (2, 'pear', 2.25), (3, 'plum', NULL);
PREPARE so_by_price (numeric) AS SELECT id, name FROM so_items WHERE price > $1 ORDER BY id;
EXECUTE so_by_price(1);
EXECUTE so_by_price('2.00');
PREPARE so_name (int) AS SELECT name FROM so_items WHERE id = $1;
EXECUTE so_name(2);
SELECT name FROM pg_prepared_statements ORDER BY name;
DEALLOCATE so_name;
SELECT name FROM pg_prepared_statements ORDER BY name;
DEALLOCATE ALL;
SELECT count(*) FROM pg_prepared_statements;

BEGIN;
DECLARE so_cur CURSOR FOR SELECT id FROM so_items ORDER BY id;
SELECT name, is_holdable, is_binary, is_scrollable FROM pg_cursors;
FETCH 2 FROM so_cur;
CLOSE so_cur;
SELECT count(*) FROM pg_cursors;
COMMIT;

SELECT EXISTS (SELECT FROM so_items WHERE price IS NULL);
SELECT EXISTS (SELECT FROM so_items WHERE id > 10);
SELECT 'trigger'::regtype, 'void'::regtype, 'record'::regtype;
SELECT 'int4'::regtype::text, 'integer[]'::regtype;

CREATE FUNCTION so_add(a int, b int) RETURNS int LANGUAGE sql AS 'SELECT a + b';
SELECT so_add(2, 3);
SELECT id, so_add(id, 10) FROM so_items ORDER BY id;
CREATE OR REPLACE FUNCTION so_add(a int, b int) RETURNS int LANGUAGE sql AS 'SELECT a * b';
SELECT so_add(2, 3);
DROP FUNCTION so_add(int, int);

WITH t AS (SELECT 1, 'x'::text, 2 + 3) SELECT * FROM t;
WITH t(a) AS (SELECT 1, 2) SELECT * FROM t;
SELECT unnest(ARRAY['b', 'a', 'b']) AS v, count(*) FROM so_items GROUP BY v ORDER BY v;
