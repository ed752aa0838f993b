-- A query text of several statements is one transaction (PostgreSQL's implicit transaction block): an error
-- undoes the text's statements before it, back to a COMMIT or ROLLBACK of the text; a BEGIN in the text makes
-- the block explicit; SAVEPOINT is refused in it; SET LOCAL lasts until its end; deferred constraints are
-- checked at its end. And a text with a statement the parser does not read as a whole (ALTER SEQUENCE, SET,
-- LOCK among others) still has each statement translated.
CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t VALUES (1, 'a'); INSERT INTO t VALUES (1, 'dup');
SELECT count(*) FROM t;
INSERT INTO t VALUES (1, 'a'); INSERT INTO t VALUES (2, 'b');
SELECT * FROM t ORDER BY id;
CREATE TABLE u (x int); INSERT INTO u VALUES (1); SELECT 1/0;
SELECT * FROM u;
INSERT INTO t VALUES (3, 'c'); COMMIT; INSERT INTO t VALUES (4, 'd'); SELECT 1/0;
SELECT id FROM t ORDER BY id;
INSERT INTO t VALUES (5, 'e'); ROLLBACK; INSERT INTO t VALUES (6, 'f');
SELECT id FROM t ORDER BY id;
SELECT 1; SAVEPOINT s; SELECT 2;
INSERT INTO t VALUES (10, 'x'); RELEASE SAVEPOINT s;
SELECT count(*) FROM t WHERE id = 10;
SELECT 1; BEGIN; INSERT INTO t VALUES (7, 'g');
SELECT count(*) FROM t;
ROLLBACK;
SELECT count(*) FROM t;
BEGIN; INSERT INTO t VALUES (8, 'h'); COMMIT; INSERT INTO t VALUES (9, 'i'); SELECT 1/0;
SELECT id FROM t ORDER BY id;
BEGIN; INSERT INTO t VALUES (11, 'k'); SELECT 1/0; INSERT INTO t VALUES (12, 'l');
SELECT 1;
ROLLBACK;
SELECT id FROM t WHERE id > 10 ORDER BY id;
SELECT 1; SET LOCAL work_mem = '7MB'; SHOW work_mem;
SHOW work_mem;
SET work_mem = '5MB'; SELECT 1/0;
SHOW work_mem;
SET work_mem = '6MB'; SELECT 1;
SHOW work_mem;
RESET work_mem;
LOCK t; SELECT count(*) FROM t;
SELECT 1; LOCK t IN SHARE MODE; UPDATE t SET v = 'z' WHERE id = 1; SELECT v FROM t WHERE id = 1;
CREATE TABLE s (id serial PRIMARY KEY, v text); ALTER SEQUENCE s_id_seq RESTART WITH 100; INSERT INTO s (v) VALUES ('x') RETURNING id;
INSERT INTO s (v) VALUES ('y') RETURNING id;
SELECT id, v FROM s ORDER BY id;
CREATE TABLE s2 (id serial PRIMARY KEY, v text); ALTER SEQUENCE s2_id_seq RESTART WITH 50; INSERT INTO s2 (v) VALUES ('x'); SELECT 1/0;
SELECT * FROM s2;
SELECT 1; DISCARD ALL;
DECLARE c CURSOR FOR SELECT id FROM t ORDER BY id; FETCH 2 FROM c;
FETCH c;
CREATE TABLE p (id int PRIMARY KEY); CREATE TABLE c2 (p int REFERENCES p DEFERRABLE INITIALLY DEFERRED);
INSERT INTO c2 VALUES (1); INSERT INTO p VALUES (1);
INSERT INTO c2 VALUES (2); SELECT 1;
SELECT count(*) FROM c2;
INSERT INTO t VALUES (20, 'n'); SET work_mem = 'not a size'; INSERT INTO t VALUES (21, 'o');
SELECT count(*) FROM t WHERE id >= 20;
SELECT now() = now(); SELECT 2;
