-- Temporary tables beside the database's own (issue 12's INSERT defaults; 2026-12-06): defaults and sequences
-- filled per table, a temporary table's own defaults, and a temporary table named as a table (PostgreSQL hides
-- the table for the session; Cambium refuses with 0A000, a known difference, since its catalog keeps types and
-- sequences by bare name).
CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, price numeric(8,2) DEFAULT 0, added_on date DEFAULT '2020-01-01');
INSERT INTO items (name) VALUES ('a') RETURNING id, name, price, added_on;
INSERT INTO items (name, price) VALUES ('b', 2.5) RETURNING id, price;
CREATE TEMP TABLE staged (n int DEFAULT 7, note text DEFAULT 'x');
INSERT INTO staged DEFAULT VALUES RETURNING n, note;
INSERT INTO staged (note) VALUES ('y') RETURNING n, note;
INSERT INTO items (name) SELECT note FROM staged ORDER BY note RETURNING id, name;
SELECT id, name, price FROM items ORDER BY id;
DROP TABLE items;
CREATE TABLE items (id serial PRIMARY KEY, name text, qty int DEFAULT 1);
INSERT INTO items (name) VALUES ('again') RETURNING id, name, qty;
CREATE TEMP TABLE items (name text);
INSERT INTO items (name) VALUES ('which') RETURNING *;
SELECT count(*) FROM staged;
DROP TABLE staged;
