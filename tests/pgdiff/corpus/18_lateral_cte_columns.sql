-- LATERAL as ORMs and introspection queries write it (drizzle's relational queries: a LEFT JOIN LATERAL of a
-- json_agg per outer row; drizzle-kit's index columns: CROSS JOIN LATERAL over unnest and generate_subscripts),
-- CTE column names (lists shorter or longer than the query, repeated names read through *), and a catalog
-- vector subscripted by a lateral column named like a table alias.

CREATE TABLE lc_users (id serial PRIMARY KEY, email varchar(200) NOT NULL, name text);
CREATE TABLE lc_posts (id serial PRIMARY KEY, author_id integer NOT NULL REFERENCES lc_users (id), title text NOT NULL, score int);
CREATE INDEX lc_posts_author_idx ON lc_posts USING btree (author_id);
CREATE UNIQUE INDEX lc_posts_author_title ON lc_posts (author_id, title);
INSERT INTO lc_users (email, name) VALUES ('a@x', 'Ann'), ('b@x', 'Bob'), ('c@x', NULL);
INSERT INTO lc_posts (author_id, title, score) VALUES (1, 'p1', 3), (1, 'p2', 5), (2, 'q1', NULL);
select "users"."id", "users"."email", "users_posts"."data" as "posts" from "lc_users" "users" left join lateral (select coalesce(json_agg(json_build_array("users_posts"."title") order by "users_posts"."id"), '[]'::json) as "data" from "lc_posts" "users_posts" where "users_posts"."author_id" = "users"."id") "users_posts" on true order by "users"."id";
SELECT u.id, s.n, s.total FROM lc_users u LEFT JOIN LATERAL (SELECT count(*) AS n, sum(p.score) AS total FROM lc_posts p WHERE p.author_id = u.id) s ON true ORDER BY u.id;
SELECT u.id, s.n FROM lc_users u CROSS JOIN LATERAL (SELECT count(*) AS n FROM lc_posts p WHERE p.author_id = u.id) s WHERE s.n > 0 ORDER BY s.n DESC, u.id;
SELECT u.id, last.title FROM lc_users u LEFT JOIN LATERAL (SELECT p.title FROM lc_posts p WHERE p.author_id = u.id ORDER BY p.id DESC LIMIT 1) last ON true ORDER BY u.id;
SELECT u.id, r.data FROM lc_users u LEFT JOIN LATERAL (SELECT json_build_array(a.email, c.n) AS data FROM (SELECT * FROM lc_users a WHERE a.id = u.id LIMIT 1) a LEFT JOIN LATERAL (SELECT count(*) AS n FROM lc_posts p WHERE p.author_id = a.id) c ON true) r ON true ORDER BY u.id;
SELECT u.id, k.v, k.pos FROM lc_users u CROSS JOIN LATERAL (SELECT unnest(ARRAY[u.id, u.id * 10]), generate_subscripts(ARRAY[u.id, u.id * 10], 1)) AS k(v, pos) ORDER BY u.id, k.pos;
SELECT u.id, x.w FROM lc_users u LEFT JOIN LATERAL (SELECT upper(w) AS w FROM unnest(string_to_array(u.name, 'n')) AS w) x ON true ORDER BY u.id, x.w;
SELECT u.id, p.title FROM lc_users u JOIN LATERAL (SELECT title FROM lc_posts WHERE author_id = u.id) p ON true ORDER BY 1, 2;
SELECT t.relname, ic.relname AS indexname, k.i AS index_order, a.attname, i.indoption[k.i - 1] & 1 = 1 AS descending FROM pg_class t JOIN pg_index i ON t.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid CROSS JOIN LATERAL (SELECT unnest(i.indkey), generate_subscripts(i.indkey, 1) + 1) AS k(attnum, i) LEFT JOIN pg_attribute AS a ON i.indrelid = a.attrelid AND k.attnum = a.attnum WHERE t.relname = 'lc_posts' ORDER BY 2, 3;
SELECT DISTINCT ON (t.relname, ic.relname, k.i) t.relname AS table_name, ic.relname AS indexname, k.i AS index_order, i.indisunique AS is_unique, am.amname AS method, coalesce(a.attname, pg_get_indexdef(i.indexrelid, k.i, false)) AS column_name FROM pg_class t LEFT JOIN pg_index i ON t.oid = i.indrelid LEFT JOIN pg_class ic ON ic.oid = i.indexrelid CROSS JOIN LATERAL (SELECT unnest(i.indkey), generate_subscripts(i.indkey, 1) + 1) AS k(attnum, i) LEFT JOIN pg_attribute AS a ON i.indrelid = a.attrelid AND k.attnum = a.attnum JOIN pg_namespace c ON c.oid = t.relnamespace LEFT JOIN pg_am AS am ON ic.relam = am.oid JOIN pg_opclass opc ON opc.oid = ANY(i.indclass) WHERE c.nspname = 'public' AND t.relname = 'lc_posts' ORDER BY 1, 2, 3;
SELECT id, unnest(ARRAY[1, 2]) + id AS shifted, generate_subscripts(ARRAY['a', 'b'], 1) * 10 AS tens FROM lc_users WHERE id = 1 ORDER BY 2;
WITH t(a) AS (SELECT 1, 2, 3 AS c) SELECT * FROM t;
WITH t(a, b, c) AS (SELECT 1, 2) SELECT * FROM t;
WITH t AS (SELECT 1, 2), u AS (SELECT * FROM t) SELECT x.*, 3 FROM u AS x;
WITH t AS (SELECT id AS k, name AS k FROM lc_users) SELECT * FROM t ORDER BY 1;
WITH t AS (SELECT 1 AS a, 2 AS b) SELECT * FROM t;
-- An inner or cross LATERAL of at most one row per outer row (the top row by some order): outer rows with none go.
SELECT u.id, last.title FROM lc_users u CROSS JOIN LATERAL (SELECT p.title FROM lc_posts p WHERE p.author_id = u.id ORDER BY p.id DESC LIMIT 1) last ORDER BY u.id;
SELECT u.id, last.title FROM lc_users u JOIN LATERAL (SELECT p.title, p.score FROM lc_posts p WHERE p.author_id = u.id ORDER BY p.score DESC NULLS LAST, p.id LIMIT 1) last ON last.title <> 'p1' ORDER BY u.id;
SELECT u.id, s.n FROM lc_users u JOIN LATERAL (SELECT count(*) AS n FROM lc_posts p WHERE p.author_id = u.id HAVING count(*) > 1) s ON true ORDER BY u.id;
SELECT u.id, f.title FROM lc_users u LEFT JOIN lc_posts q ON q.author_id = u.id AND q.title = 'q1' CROSS JOIN LATERAL (SELECT p.title FROM lc_posts p WHERE p.author_id = u.id LIMIT 1 OFFSET 0) f WHERE q.id IS NULL ORDER BY u.id;
-- A LATERAL of many rows per outer row, correlated by equalities: top N per group, its left join keeping outer
-- rows with none, an OFFSET, NULLs in the subquery's order, DISTINCT, a column list, an inner join's condition.
INSERT INTO lc_posts (author_id, title, score) VALUES (1, 'p3', NULL), (1, 'p4', 4), (2, 'q2', 2);
SELECT u.id, top.title, top.score FROM lc_users u LEFT JOIN LATERAL (SELECT p.title, p.score FROM lc_posts p WHERE p.author_id = u.id ORDER BY p.score DESC, p.id LIMIT 2) top ON true ORDER BY u.id, top.score DESC, top.title;
SELECT u.id, top.title FROM lc_users u CROSS JOIN LATERAL (SELECT p.title FROM lc_posts p WHERE p.author_id = u.id ORDER BY p.score ASC, p.id LIMIT 2 OFFSET 1) top ORDER BY 1, 2;
SELECT u.email, s.score FROM lc_users u JOIN LATERAL (SELECT DISTINCT p.score FROM lc_posts p WHERE u.id = p.author_id AND p.score IS NOT NULL) s ON s.score > 2 ORDER BY 1, 2;
SELECT u.id, x.t, x.doubled FROM lc_users u LEFT JOIN LATERAL (SELECT p.title, p.score * 2 FROM lc_posts p WHERE p.author_id = u.id AND p.title LIKE '%1') AS x(t, doubled) ON true ORDER BY 1, 2;
SELECT u.id, count(p.title) AS n, max(p.score) AS best FROM lc_users u LEFT JOIN LATERAL (SELECT title, score FROM lc_posts WHERE author_id = u.id ORDER BY id LIMIT 3) p ON true GROUP BY u.id ORDER BY u.id;
