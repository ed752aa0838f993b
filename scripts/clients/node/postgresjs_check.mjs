// postgres.js (the `postgres` package) against a Cambium database (CLIENTS_URI): a driver of its own (not
// node-postgres) that prepares every statement, fetches the array types' OIDs at connect (`typarray` of
// `pg_type`), and types its parameters from the server's Describe. Checked: its tagged-template queries with
// dynamic inserts and `IN` lists, the types applications use both ways, arrays and JSON, transactions with a
// savepoint, a cursor in batches, COPY FROM STDIN through a stream, LISTEN/NOTIFY, errors with SQLSTATEs, and
// `unsafe` with parameters.
//
// TLS: as pg_check.mjs explains, Cambium's strings carry `sslmode=prefer`; postgres.js reads `prefer` as "try
// TLS, verify nothing", which connects either way.
import postgres from "postgres";

import { Checks, expectEqual, uriFromEnv } from "./harness.mjs";

const URI = uriFromEnv();

/** Runs `fn` with a postgres.js instance (a pool of up to 4), ended afterwards. */
async function withSql(fn) {
  const sql = postgres(URI, { max: 4, connect_timeout: 10, idle_timeout: 5, onnotice: () => {} });
  try {
    return await fn(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const checks = new Checks("postgresjs");

await checks.run("connect", () =>
  withSql(async (sql) => {
    const [row] = await sql`SELECT 1 AS one, current_setting('server_version_num') AS v`;
    expectEqual("SELECT 1", row.one, 1);
    if (Number(row.v) < 150000) throw new Error(`server_version_num ${row.v}`);
  }),
);

await checks.run(
  "types",
  () =>
    withSql(async (sql) => {
      await sql`DROP TABLE IF EXISTS pjs_types`;
      await sql`CREATE TABLE pjs_types (id serial PRIMARY KEY, name text NOT NULL, price numeric(10,2),
        at timestamptz, day date, tags text[], ids int4[], meta jsonb, ok boolean, big int8, f float8, u uuid,
        b bytea)`;
      const at = new Date("2024-02-29T13:14:15.123Z");
      const values = {
        name: "h\u00e9llo 'q'",
        price: "12.50",
        at,
        day: "2024-02-29",
        tags: ["a", "b c"],
        ids: [1, 2, 3],
        meta: { k: [1, true, null] },
        ok: true,
        big: 9007199254740993n,
        f: 1.25,
        u: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        b: Buffer.from([0, 1, 255]),
      };
      const [row] = await sql`INSERT INTO pjs_types ${sql(values)} RETURNING *`;
      expectEqual("id", row.id, 1);
      expectEqual("text", row.name, values.name);
      expectEqual("numeric (a string)", row.price, "12.50");
      expectEqual("timestamptz", row.at, at);
      expectEqual("text[]", row.tags, values.tags);
      expectEqual("int4[]", row.ids, values.ids);
      expectEqual("jsonb", row.meta, values.meta);
      expectEqual("boolean", row.ok, true);
      expectEqual("int8 (a string)", row.big, "9007199254740993");
      expectEqual("float8", row.f, 1.25);
      expectEqual("uuid", row.u, values.u);
      expectEqual("bytea", row.b, values.b);
      const [day] = await sql`SELECT day::text AS d FROM pjs_types WHERE id = ${1}`;
      expectEqual("date", day.d, "2024-02-29");
    }),
  ["connect"],
);

await checks.run(
  "dynamic_queries",
  () =>
    withSql(async (sql) => {
      await sql`DROP TABLE IF EXISTS pjs_items`;
      await sql`CREATE TABLE pjs_items (id serial PRIMARY KEY, name text NOT NULL, qty int DEFAULT 1)`;
      const inserted = await sql`INSERT INTO pjs_items ${sql([{ name: "a" }, { name: "b" }, { name: "c" }], "name")} RETURNING id`;
      expectEqual("multi-row insert", inserted.map((r) => r.id), [1, 2, 3]);
      const inList = await sql`SELECT name FROM pjs_items WHERE id IN ${sql([1, 3])} ORDER BY id`;
      expectEqual("IN list", inList.map((r) => r.name), ["a", "c"]);
      const anyArray = await sql`SELECT name FROM pjs_items WHERE id = ANY(${[2, 3]}::int[]) ORDER BY id`;
      expectEqual("= ANY(array)", anyArray.map((r) => r.name), ["b", "c"]);
      await sql`UPDATE pjs_items SET ${sql({ qty: 5, name: "B" })} WHERE id = ${2}`;
      const [updated] = await sql`SELECT name, qty FROM pjs_items WHERE id = ${2}`;
      expectEqual("dynamic update", [updated.name, updated.qty], ["B", 5]);
      const column = "name";
      const byIdentifier = await sql`SELECT ${sql(column)} FROM pjs_items ORDER BY ${sql(column)} DESC LIMIT 1`;
      expectEqual("identifiers", byIdentifier[0].name, "c");
      const [unsafe] = await sql.unsafe("SELECT $1::int + 1 AS x, $2::text AS t", [41, "y"]);
      expectEqual("unsafe with parameters", [unsafe.x, unsafe.t], [42, "y"]);
    }),
  ["connect"],
);

await checks.run(
  "transactions",
  () =>
    withSql(async (sql) => {
      await sql`DROP TABLE IF EXISTS pjs_tx`;
      await sql`CREATE TABLE pjs_tx (id int PRIMARY KEY)`;
      await sql.begin(async (tx) => {
        await tx`INSERT INTO pjs_tx VALUES (1)`;
        await tx
          .savepoint(async (sp) => {
            await sp`INSERT INTO pjs_tx VALUES (2)`;
            await sp`INSERT INTO pjs_tx VALUES (1)`;
          })
          .catch((error) => {
            if (error.code !== "23505") throw error;
          });
      });
      await sql
        .begin(async (tx) => {
          await tx`INSERT INTO pjs_tx VALUES (3)`;
          throw new Error("roll back");
        })
        .catch((error) => {
          if (error.message !== "roll back") throw error;
        });
      const rows = await sql`SELECT id FROM pjs_tx ORDER BY id`;
      expectEqual("rows after a savepoint's and a transaction's rollback", rows.map((r) => r.id), [1]);
    }),
  ["connect"],
);

await checks.run(
  "cursor",
  () =>
    withSql(async (sql) => {
      const sizes = [];
      let total = 0;
      for await (const rows of sql`SELECT g FROM generate_series(1, 25) AS g ORDER BY g`.cursor(10)) {
        sizes.push(rows.length);
        total += rows.reduce((sum, row) => sum + row.g, 0);
      }
      expectEqual("batches", sizes, [10, 10, 5]);
      expectEqual("sum", total, 325);
    }),
  ["connect"],
);

await checks.run(
  "copy_from_stdin",
  () =>
    withSql(async (sql) => {
      await sql`DROP TABLE IF EXISTS pjs_copy`;
      await sql`CREATE TABLE pjs_copy (id int PRIMARY KEY, name text)`;
      const stream = await sql`COPY pjs_copy (id, name) FROM STDIN WITH (FORMAT csv)`.writable();
      await new Promise((resolve, reject) => {
        stream.on("finish", resolve);
        stream.on("error", reject);
        stream.write('1,"a, b"\n2,\n');
        stream.end("3,c\n");
      });
      const rows = await sql`SELECT id, name FROM pjs_copy ORDER BY id`;
      expectEqual("copied rows", rows.map((r) => [r.id, r.name]), [[1, "a, b"], [2, null], [3, "c"]]);
    }),
  ["connect"],
);

await checks.run(
  "listen_notify",
  () =>
    withSql(async (sql) => {
      let resolveHeard;
      const heard = new Promise((resolve) => {
        resolveHeard = resolve;
      });
      await sql.listen("pjs_events", (payload) => resolveHeard(payload));
      await sql`SELECT pg_notify('pjs_events', 'hello')`;
      const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("no notification in 10 s")), 10000));
      expectEqual("payload", await Promise.race([heard, timeout]), "hello");
    }),
  ["connect"],
);

await checks.run(
  "errors",
  () =>
    withSql(async (sql) => {
      for (const [query, code] of [
        [() => sql`SELECT 1/0`, "22012"],
        [() => sql`SELECT * FROM pjs_missing`, "42P01"],
        [() => sql`INSERT INTO pjs_tx VALUES (1)`, "23505"],
        [() => sql`SELECT ${"x"}::int`, "22P02"],
      ]) {
        let got = null;
        try {
          await query();
        } catch (error) {
          got = error.code;
        }
        expectEqual("SQLSTATE", got, code);
      }
      const [after] = await sql`SELECT 2 AS two`;
      expectEqual("after the errors", after.two, 2);
    }),
  ["transactions"],
);
