-- Extensions migrations enable, and pgcrypto's functions apps call: `CREATE EXTENSION` of one whose functions
-- exist answers as on a fresh PostgreSQL database (a command, no rows), plpgsql is there already; digest and hmac
-- over every algorithm PostgreSQL's pgcrypto offers, gen_random_bytes and its bounds.
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE EXTENSION IF NOT EXISTS "uuid-ossp";
CREATE EXTENSION IF NOT EXISTS plpgsql;
CREATE EXTENSION plpgsql;
CREATE EXTENSION no_such_extension;
SELECT encode(digest('a', 'md5'), 'hex'), encode(digest('a', 'sha1'), 'hex'), encode(digest('a', 'sha224'), 'hex');
SELECT encode(digest('abc', 'sha256'), 'hex'), encode(digest('abc'::bytea, 'SHA384'), 'hex');
SELECT encode(digest('abc', 'sha512'), 'hex');
SELECT digest(NULL, 'md5'), digest('a', NULL), digest('', 'sha256') = sha256(''::bytea);
SELECT digest('a', 'foo');
SELECT encode(hmac('msg', 'key', 'md5'), 'hex'), encode(hmac('msg', 'key', 'sha1'), 'hex');
SELECT encode(hmac('msg', 'key', 'sha224'), 'hex'), encode(hmac('msg'::bytea, 'key'::bytea, 'sha256'), 'hex');
SELECT encode(hmac('msg', 'key', 'sha384'), 'hex'), encode(hmac('msg', '', 'sha512'), 'hex');
SELECT hmac('msg', 'key', 'whirlpool');
SELECT length(gen_random_bytes(16)), length(gen_random_bytes(1024)), gen_random_bytes(16) <> gen_random_bytes(16);
SELECT gen_random_bytes(0);
SELECT gen_random_bytes(1025);
SELECT length(gen_random_uuid()::text), uuid_generate_v4() <> uuid_generate_v4();
