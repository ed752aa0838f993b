-- What ORMs and migration tools send, with their bind parameters written as literals (the runner uses the
-- simple query protocol): SQLAlchemy 2 on connect, has_table and its inspector; Alembic's version table;
-- Django's introspection, migrations table and sequence reset; ActiveRecord's type map, schema_migrations
-- and column query; Prisma's migrations table and advisory lock; drizzle's migrations schema. Catalog
-- queries select names and types, never OIDs of user objects. (Issue 11, point 5.)

-- SQLAlchemy 2 (psycopg) on connect.
select pg_catalog.version() like 'PostgreSQL 15%';
select current_schema();
show transaction isolation level;
show standard_conforming_strings;
SELECT CAST('test plain returns' AS VARCHAR(60)) AS anon_1;
SELECT CAST('test unicode returns' AS VARCHAR(60)) AS anon_1;
-- SQLAlchemy has_table.
SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relname = 'users' AND pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p', 'f', 'v', 'm']) AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog';
-- SQLAlchemy create_all.
CREATE TABLE users (
	id SERIAL NOT NULL,
	name VARCHAR(30) NOT NULL,
	fullname VARCHAR,
	bio TEXT,
	created_at TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
	is_admin BOOLEAN NOT NULL,
	balance NUMERIC(10, 2),
	prefs JSON,
	PRIMARY KEY (id)
);
CREATE TABLE addresses (
	id SERIAL NOT NULL,
	email_address VARCHAR NOT NULL,
	user_id INTEGER NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(user_id) REFERENCES users (id)
);
CREATE INDEX ix_addresses_email_address ON addresses (email_address);
SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relname = 'users' AND pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p', 'f', 'v', 'm']) AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog';
-- SQLAlchemy ORM unit of work.
INSERT INTO users (name, fullname, is_admin, balance, prefs) VALUES ('spongebob', 'Spongebob Squarepants', false, 10.50, '{"theme": "sea"}') RETURNING users.id, users.created_at IS NOT NULL AS anon_1;
INSERT INTO users (name, fullname, is_admin, balance, prefs) VALUES ('sandy', 'Sandy Cheeks', true, NULL, NULL), ('patrick', NULL, false, 0, '[]') RETURNING users.id;
INSERT INTO addresses (email_address, user_id) VALUES ('spongebob@sqlalchemy.org', 1), ('sandy@sqlalchemy.org', 2), ('sandy@squirrelpower.org', 2) RETURNING addresses.id;
SELECT users.id, users.name, users.fullname, users.is_admin, users.balance, users.prefs FROM users WHERE users.name IN ('spongebob', 'sandy') ORDER BY users.id;
SELECT users.id AS users_id, users.name AS users_name FROM users WHERE users.id = 2;
SELECT addresses.id, addresses.email_address, addresses.user_id FROM addresses WHERE 2 = addresses.user_id ORDER BY addresses.id;
SELECT users.name, addresses.email_address FROM users JOIN addresses ON users.id = addresses.user_id WHERE addresses.email_address LIKE '%sqlalchemy%' ORDER BY addresses.id;
SELECT count(*) AS count_1 FROM (SELECT users.id AS users_id FROM users WHERE users.is_admin = false) AS anon_1;
UPDATE users SET fullname='Patrick Star' WHERE users.id = 3;
DELETE FROM addresses WHERE addresses.id = 3;
SELECT users.id, users.name FROM users ORDER BY users.id LIMIT 2 OFFSET 1;
-- SQLAlchemy inspector: table names, columns, primary key, foreign keys, indexes.
SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p']) AND pg_catalog.pg_class.relpersistence != 't' AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog' ORDER BY pg_catalog.pg_class.relname;
SELECT pg_catalog.pg_attribute.attname AS name, pg_catalog.format_type(pg_catalog.pg_attribute.atttypid, pg_catalog.pg_attribute.atttypmod) AS format_type, (SELECT pg_catalog.pg_get_expr(pg_catalog.pg_attrdef.adbin, pg_catalog.pg_attrdef.adrelid) AS pg_get_expr_1 FROM pg_catalog.pg_attrdef WHERE pg_catalog.pg_attrdef.adrelid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attrdef.adnum = pg_catalog.pg_attribute.attnum AND pg_catalog.pg_attribute.atthasdef) AS "default", pg_catalog.pg_attribute.attnotnull AS not_null, pg_catalog.pg_class.relname AS table_name, pg_catalog.pg_description.description AS comment, pg_catalog.pg_attribute.attgenerated AS generated, pg_catalog.pg_attribute.attidentity AS identity FROM pg_catalog.pg_class LEFT OUTER JOIN pg_catalog.pg_attribute ON pg_catalog.pg_class.oid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attribute.attnum > 0 AND NOT pg_catalog.pg_attribute.attisdropped LEFT OUTER JOIN pg_catalog.pg_description ON pg_catalog.pg_description.objoid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_description.objsubid = pg_catalog.pg_attribute.attnum JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p', 'f', 'v', 'm']) AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog' AND pg_catalog.pg_class.relname IN ('users', 'addresses') ORDER BY pg_catalog.pg_class.relname, pg_catalog.pg_attribute.attnum;
SELECT attr.conrelid::regclass::text AS table_name, attr.conname, attr.attname FROM (SELECT con.conrelid, con.conname, a.attname, con.ord FROM (SELECT c.conrelid, c.conname, unnest(c.conkey) AS attnum, generate_subscripts(c.conkey, 1) AS ord FROM pg_catalog.pg_constraint c WHERE c.contype = 'p') AS con JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.attnum) AS attr WHERE attr.conrelid::regclass::text IN ('users', 'addresses') ORDER BY 1, attr.ord;
SELECT pg_catalog.pg_class.relname, pg_catalog.pg_constraint.conname, pg_catalog.pg_get_constraintdef(pg_catalog.pg_constraint.oid, true) AS condef, pg_catalog.pg_namespace.nspname AS referred_schema FROM pg_catalog.pg_class JOIN pg_catalog.pg_constraint ON pg_catalog.pg_constraint.conrelid = pg_catalog.pg_class.oid AND pg_catalog.pg_constraint.contype = 'f' LEFT OUTER JOIN pg_catalog.pg_class AS cls_ref ON cls_ref.oid = pg_catalog.pg_constraint.confrelid LEFT OUTER JOIN pg_catalog.pg_namespace ON cls_ref.relnamespace = pg_catalog.pg_namespace.oid WHERE pg_catalog.pg_class.relname = 'addresses' AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) ORDER BY pg_catalog.pg_class.relname, pg_catalog.pg_constraint.conname;
SELECT pg_catalog.pg_index.indrelid::regclass::text, cls_idx.relname AS relname_index, pg_catalog.pg_index.indisunique, pg_catalog.pg_index.indisprimary, pg_catalog.pg_am.amname, pg_catalog.pg_get_indexdef(pg_catalog.pg_index.indexrelid) FROM pg_catalog.pg_index JOIN pg_catalog.pg_class AS cls_idx ON pg_catalog.pg_index.indexrelid = cls_idx.oid JOIN pg_catalog.pg_am ON cls_idx.relam = pg_catalog.pg_am.oid WHERE pg_catalog.pg_index.indrelid::regclass::text IN ('users', 'addresses') ORDER BY 1, 2;
-- Alembic.
CREATE TABLE alembic_version (
    version_num VARCHAR(32) NOT NULL,
    CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
SELECT alembic_version.version_num FROM alembic_version;
INSERT INTO alembic_version (version_num) VALUES ('1975ea83b712') RETURNING alembic_version.version_num;
ALTER TABLE users ADD COLUMN last_login TIMESTAMP WITHOUT TIME ZONE;
ALTER TABLE users ALTER COLUMN fullname TYPE VARCHAR(100);
ALTER TABLE users ALTER COLUMN bio SET NOT NULL;
UPDATE alembic_version SET version_num='ae1027a6acf' WHERE alembic_version.version_num = '1975ea83b712';
SELECT alembic_version.version_num FROM alembic_version;
-- Django: connection setup, migrations table, introspection, sequence reset.
SELECT set_config('TimeZone', 'UTC', false);
CREATE TABLE "django_migrations" ("id" bigint NOT NULL PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY, "app" varchar(255) NOT NULL, "name" varchar(255) NOT NULL, "applied" timestamp with time zone NOT NULL);
INSERT INTO "django_migrations" ("app", "name", "applied") VALUES ('contenttypes', '0001_initial', '2024-01-01T00:00:00+00:00'::timestamptz) RETURNING "django_migrations"."id";
INSERT INTO "django_migrations" ("app", "name", "applied") VALUES ('auth', '0001_initial', '2024-01-01T00:00:01+00:00'::timestamptz) RETURNING "django_migrations"."id";
SELECT "django_migrations"."id", "django_migrations"."app", "django_migrations"."name", "django_migrations"."applied" FROM "django_migrations" ORDER BY "django_migrations"."id";
CREATE TABLE "auth_user" ("id" integer NOT NULL PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY, "password" varchar(128) NOT NULL, "last_login" timestamp with time zone NULL, "is_superuser" boolean NOT NULL, "username" varchar(150) NOT NULL UNIQUE, "first_name" varchar(150) NOT NULL, "email" varchar(254) NOT NULL, "is_staff" boolean NOT NULL, "is_active" boolean NOT NULL, "date_joined" timestamp with time zone NOT NULL);
CREATE INDEX "auth_user_username_6821ab7c_like" ON "auth_user" ("username" varchar_pattern_ops);
INSERT INTO "auth_user" ("password", "last_login", "is_superuser", "username", "first_name", "email", "is_staff", "is_active", "date_joined") VALUES ('pbkdf2_sha256$x', NULL, true, 'admin', '', 'admin@example.com', true, true, '2024-01-01T00:00:00+00:00'::timestamptz) RETURNING "auth_user"."id";
SELECT "auth_user"."id", "auth_user"."username", "auth_user"."is_superuser", "auth_user"."date_joined" FROM "auth_user" WHERE "auth_user"."username" = 'admin' LIMIT 21;
SELECT (1) AS "a" FROM "auth_user" WHERE "auth_user"."username" = 'nobody' LIMIT 1;
SELECT COUNT(*) AS "__count" FROM "auth_user";
UPDATE "auth_user" SET "last_login" = '2024-02-01T10:00:00+00:00'::timestamptz WHERE "auth_user"."id" = 1;
SELECT "auth_user"."last_login" FROM "auth_user" WHERE UPPER("auth_user"."email"::text) = UPPER('ADMIN@example.com');
SELECT "auth_user"."id" FROM "auth_user" WHERE "auth_user"."username"::text LIKE 'adm%' ORDER BY "auth_user"."id" ASC;
SELECT c.relname, CASE WHEN c.relispartition THEN 'p' WHEN c.relkind IN ('m', 'v') THEN 'v' ELSE 't' END, obj_description(c.oid, 'pg_class') FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('f', 'm', 'p', 'r', 'v') AND n.nspname NOT IN ('pg_catalog', 'pg_toast') AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY c.relname;
SELECT s.relname AS sequence_name, a.attname AS colname FROM pg_class s JOIN pg_depend d ON d.objid = s.oid AND d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass JOIN pg_attribute a ON d.refobjid = a.attrelid AND d.refobjsubid = a.attnum JOIN pg_class tbl ON tbl.oid = d.refobjid AND tbl.relname = 'auth_user' AND pg_catalog.pg_table_is_visible(tbl.oid) WHERE s.relkind = 'S';
SELECT c.conname, array(SELECT attname FROM unnest(c.conkey) WITH ORDINALITY cols(colid, arridx) JOIN pg_attribute AS ca ON cols.colid = ca.attnum WHERE ca.attrelid = c.conrelid ORDER BY cols.arridx), c.contype, (SELECT fkc.relname || '.' || fka.attname FROM pg_attribute AS fka JOIN pg_class AS fkc ON fka.attrelid = fkc.oid WHERE fka.attrelid = c.confrelid AND fka.attnum = c.confkey[1]), cl.reloptions FROM pg_constraint AS c JOIN pg_class AS cl ON c.conrelid = cl.oid WHERE cl.relname = 'addresses' AND pg_catalog.pg_table_is_visible(cl.oid) ORDER BY c.conname;
SELECT a.attname AS column_name, NOT (a.attnotnull OR (t.typtype = 'd' AND t.typnotnull)) AS is_nullable, pg_get_expr(ad.adbin, ad.adrelid) AS column_default, CASE WHEN collname = 'default' THEN NULL ELSE collname END AS collation, a.attidentity != '' AS is_autofield, col_description(a.attrelid, a.attnum) AS column_comment FROM pg_attribute a LEFT JOIN pg_attrdef ad ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum LEFT JOIN pg_collation co ON a.attcollation = co.oid JOIN pg_type t ON a.atttypid = t.oid JOIN pg_class c ON a.attrelid = c.oid JOIN pg_namespace n ON c.relnamespace = n.oid WHERE c.relkind IN ('f', 'm', 'p', 'r', 'v') AND c.relname = 'auth_user' AND n.nspname NOT IN ('pg_catalog', 'pg_toast') AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY a.attnum;
SELECT setval(pg_get_serial_sequence('"auth_user"','id'), coalesce(max("id"), 1), max("id") IS NOT null) FROM "auth_user";
SELECT setval(pg_get_serial_sequence('"addresses"','id'), coalesce(max("id"), 1), max("id") IS NOT null) FROM "addresses";
-- ActiveRecord: session setup, type map, schema_migrations, columns, primary key.
SET client_min_messages TO 'warning';
SET standard_conforming_strings = on;
SET intervalstyle = iso_8601;
SHOW max_identifier_length;
SELECT t.oid, t.typname, t.typelem, t.typdelim, t.typinput, r.rngsubtype, t.typtype, t.typbasetype FROM pg_type as t LEFT JOIN pg_range as r ON oid = rngtypid WHERE t.typname IN ('int2', 'int4', 'int8', 'oid', 'float4', 'float8', 'numeric', 'bool', 'timestamp', 'timestamptz') ORDER BY t.oid;
SELECT c.relname FROM pg_class c LEFT JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ANY (current_schemas(false)) AND c.relname = 'schema_migrations' AND c.relkind IN ('r','p');
CREATE TABLE "schema_migrations" ("version" character varying NOT NULL PRIMARY KEY);
CREATE TABLE "ar_internal_metadata" ("key" character varying NOT NULL PRIMARY KEY, "value" character varying, "created_at" timestamp(6) NOT NULL, "updated_at" timestamp(6) NOT NULL);
INSERT INTO "ar_internal_metadata" ("key", "value", "created_at", "updated_at") VALUES ('environment', 'development', '2024-01-01 10:00:00.123456', '2024-01-01 10:00:00.123456') RETURNING "key";
SELECT "schema_migrations"."version" FROM "schema_migrations" ORDER BY "schema_migrations"."version" ASC;
INSERT INTO "schema_migrations" ("version") VALUES ('20240101000000'), ('20240102000000') RETURNING "version";
CREATE TABLE "articles" ("id" bigserial primary key, "title" character varying, "body" text, "published" boolean DEFAULT FALSE, "created_at" timestamp(6) NOT NULL, "updated_at" timestamp(6) NOT NULL);
SELECT a.attname, format_type(a.atttypid, a.atttypmod), pg_get_expr(d.adbin, d.adrelid), a.attnotnull, a.atttypid, a.atttypmod, c.collname, col_description(a.attrelid, a.attnum) AS comment, attidentity AS identity, attgenerated as attgenerated FROM pg_attribute a LEFT JOIN pg_attrdef d ON a.attrelid = d.adrelid AND a.attnum = d.adnum LEFT JOIN pg_type t ON a.atttypid = t.oid LEFT JOIN pg_collation c ON a.attcollation = c.oid AND a.attcollation <> t.typcollation WHERE a.attrelid = '"articles"'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum;
SELECT attr.attname, nsp.nspname, seq.relname FROM pg_class seq, pg_attribute attr, pg_depend dep, pg_constraint cons, pg_namespace nsp WHERE seq.oid = dep.objid AND seq.relkind = 'S' AND attr.attrelid = dep.refobjid AND attr.attnum = dep.refobjsubid AND attr.attrelid = cons.conrelid AND attr.attnum = cons.conkey[1] AND seq.relnamespace = nsp.oid AND cons.contype = 'p' AND dep.classid = 'pg_class'::regclass AND dep.refobjid = '"articles"'::regclass;
INSERT INTO "articles" ("title", "body", "created_at", "updated_at") VALUES ('Hello', 'World', '2024-01-01 10:00:00', '2024-01-01 10:00:00') RETURNING "id";
SELECT "articles".* FROM "articles" WHERE "articles"."id" = 1 LIMIT 1;
SELECT "articles".* FROM "articles" WHERE "articles"."published" = FALSE ORDER BY "articles"."id" ASC LIMIT 10;
SELECT INTERVAL '1 day 2 hours 3 minutes';
SET intervalstyle = postgres;
-- Prisma: advisory lock, migrations table, introspection.
SELECT pg_advisory_lock(72707369);
SELECT EXISTS(SELECT 1 FROM pg_namespace WHERE nspname = 'public');
CREATE TABLE IF NOT EXISTS "_prisma_migrations" ("id" VARCHAR(36) PRIMARY KEY NOT NULL, "checksum" VARCHAR(64) NOT NULL, "finished_at" TIMESTAMPTZ, "migration_name" VARCHAR(255) NOT NULL, "logs" TEXT, "rolled_back_at" TIMESTAMPTZ, "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(), "applied_steps_count" INTEGER NOT NULL DEFAULT 0);
INSERT INTO "_prisma_migrations" ("id", "checksum", "migration_name", "started_at") VALUES ('a1b2c3d4-0000-0000-0000-000000000000', 'abc', '20240101_init', '2024-01-01 00:00:00+00') RETURNING "id", "applied_steps_count";
UPDATE "_prisma_migrations" SET "finished_at" = '2024-01-01 00:00:01+00', "applied_steps_count" = "applied_steps_count" + 1 WHERE "id" = 'a1b2c3d4-0000-0000-0000-000000000000';
SELECT "id", "checksum", "finished_at", "migration_name", "logs", "rolled_back_at", "started_at", "applied_steps_count" FROM "_prisma_migrations" ORDER BY "started_at" ASC;
SELECT pg_advisory_unlock(72707369);
CREATE TABLE "public"."Post" ("id" SERIAL NOT NULL, "title" TEXT NOT NULL, "authorId" INTEGER, "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP, CONSTRAINT "Post_pkey" PRIMARY KEY ("id"));
ALTER TABLE "public"."Post" ADD CONSTRAINT "Post_authorId_fkey" FOREIGN KEY ("authorId") REFERENCES "public"."users"("id") ON DELETE SET NULL ON UPDATE CASCADE;
INSERT INTO "public"."Post" ("title","authorId") VALUES ('First',1) RETURNING "public"."Post"."id", "public"."Post"."title", "public"."Post"."authorId";
SELECT "public"."Post"."id", "public"."Post"."title" FROM "public"."Post" WHERE ("public"."Post"."authorId" = 1 AND 1=1) ORDER BY "public"."Post"."id" ASC LIMIT 10 OFFSET 0;
SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default, character_maximum_length, numeric_precision, numeric_scale, is_identity FROM information_schema.columns WHERE table_schema = 'public' AND table_name IN ('Post', 'users') ORDER BY table_name, ordinal_position;
SELECT tc.constraint_name, tc.table_name, kcu.column_name, ccu.table_name AS foreign_table_name, ccu.column_name AS foreign_column_name, rc.update_rule, rc.delete_rule FROM information_schema.table_constraints AS tc JOIN information_schema.key_column_usage AS kcu ON tc.constraint_name = kcu.constraint_name AND tc.table_schema = kcu.table_schema JOIN information_schema.constraint_column_usage AS ccu ON ccu.constraint_name = tc.constraint_name AND ccu.table_schema = tc.table_schema JOIN information_schema.referential_constraints AS rc ON rc.constraint_name = tc.constraint_name WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = 'public' ORDER BY tc.constraint_name;
SELECT tc.table_name, tc.constraint_name, tc.constraint_type, kcu.column_name, kcu.ordinal_position FROM information_schema.table_constraints tc LEFT JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name AND kcu.table_schema = tc.table_schema WHERE tc.table_schema = 'public' AND tc.constraint_type IN ('PRIMARY KEY', 'UNIQUE') ORDER BY tc.table_name, tc.constraint_name, kcu.ordinal_position;
-- drizzle-kit migrations.
CREATE SCHEMA IF NOT EXISTS "drizzle";
CREATE TABLE IF NOT EXISTS "drizzle"."__drizzle_migrations" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint);
select id, hash, created_at from "drizzle"."__drizzle_migrations" order by created_at desc limit 1;
insert into "drizzle"."__drizzle_migrations" ("hash", "created_at") values('9b0d8a', 1704067200000);
select id, hash, created_at from "drizzle"."__drizzle_migrations" order by created_at desc limit 1;
select table_schema, table_name from information_schema.tables where table_schema not in ('pg_catalog', 'information_schema', 'pg_toast') and table_type = 'BASE TABLE' order by table_schema, table_name;
SELECT n.nspname AS table_schema, c.relname AS table_name, CASE WHEN c.relkind = 'r' THEN 'table' WHEN c.relkind = 'v' THEN 'view' WHEN c.relkind = 'm' THEN 'materialized_view' END AS type FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'v', 'm') AND n.nspname = 'drizzle' ORDER BY 1, 2;
select pg_type.typname, pg_enum.enumlabel from pg_type join pg_enum on pg_enum.enumtypid = pg_type.oid order by 1, pg_enum.enumsortorder;
SELECT sequence_schema, sequence_name, start_value, minimum_value, maximum_value, increment, cycle_option FROM information_schema.sequences WHERE sequence_schema IN ('public', 'drizzle') ORDER BY 1, 2;
-- information_schema views tools read.
SELECT table_catalog = current_database(), table_schema, table_name, table_type, is_insertable_into FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name;
SELECT column_name, ordinal_position, is_nullable, data_type, character_maximum_length, datetime_precision, udt_name FROM information_schema.columns WHERE table_name = 'articles' ORDER BY ordinal_position;
SELECT constraint_name, unique_constraint_name, match_option, update_rule, delete_rule FROM information_schema.referential_constraints WHERE constraint_schema = 'public' ORDER BY constraint_name;
SELECT table_name, column_name, constraint_name, ordinal_position, position_in_unique_constraint FROM information_schema.key_column_usage WHERE table_schema = 'public' ORDER BY table_name, constraint_name, ordinal_position;
SELECT table_name, view_definition IS NOT NULL FROM information_schema.views WHERE table_schema = 'public' ORDER BY table_name;
SELECT schema_name, schema_owner FROM information_schema.schemata WHERE schema_name IN ('public', 'drizzle') ORDER BY schema_name;
SELECT routine_name FROM information_schema.routines WHERE routine_schema = 'public' ORDER BY routine_name;
SELECT to_regtype('int4'), to_regtype('integer')::oid, to_regtype('hstore') IS NULL, to_regtype('text[]');
SELECT typname AS name, oid, typarray AS array_oid, oid::regtype::text AS regtype, typdelim AS delimiter FROM pg_type t WHERE t.oid = to_regtype('uuid') ORDER BY t.oid;
SELECT 'integer'::regtype::oid, pg_collation_is_visible(100);
SELECT x.tableoid, x.extname FROM pg_extension x;
SELECT tableoid, nspname FROM pg_namespace WHERE nspname = 'public';
SELECT typname[0] = '_', acldefault('n', 10) IS NULL FROM pg_type WHERE typname = '_int4';
SELECT option_name, option_value FROM pg_options_to_table(ARRAY['a=1', 'b=x=y']);
SELECT pg_catalog.pg_opclass.oid, pg_catalog.pg_opclass.opcname FROM pg_catalog.pg_opclass WHERE NOT pg_catalog.pg_opclass.opcdefault AND pg_catalog.pg_opclass.opcname = 'no such';
SELECT schemaname, tablename, policyname AS name FROM pg_policies;
CREATE TABLE idx_order (a int, b int, c int, PRIMARY KEY (c, a));
CREATE INDEX idx_order_ba ON idx_order (b, a);
SELECT i.indkey, i.indkey[0], i.indkey[1] FROM pg_index i WHERE i.indrelid = 'idx_order'::regclass ORDER BY 1;
SELECT unnest(i.indkey) AS attnum, generate_subscripts(i.indkey, 1) AS ord FROM pg_index i WHERE i.indrelid = 'idx_order'::regclass ORDER BY 1, 2;
SELECT unnest(ARRAY[1, 2]), unnest(ARRAY['a', 'b', 'c']);
SELECT unnest(ARRAY[]::int[]), unnest(ARRAY[]::int[]);
SELECT generate_subscripts('{{1,2},{3,4}}'::int[], 2);
BEGIN;
LOCK TABLE public.idx_order IN ACCESS SHARE MODE;
LOCK TABLE idx_order IN SHARE ROW EXCLUSIVE MODE;
COMMIT;
LOCK TABLE nosuch_table IN ACCESS SHARE MODE;
SELECT count(*) FROM idx_order WHERE a IS NOT DISTINCT FROM NULL;
