// node-postgres (pg) against a Cambium database (CLIENTS_URI): the result types applications rely on, each as a
// parameter into a typed column and back: int4 as a number, int8 as a string (pg's default: no precision lost),
// booleans, a Buffer as bytea, a Date as timestamptz; also text, numeric (a string) and json.
//
// pg reads `sslmode=prefer` (which Cambium's connection strings carry) as "TLS, and verify the certificate".
// Cambium's certificate is self-signed: a user verifies it with that certificate as the CA (`cambium up` names
// its file; CLIENTS_PG_ROOT_CERT), so `connect_as_given` uses the string as the API gives it plus
// `sslrootcert=<that file>`, verification on (hostname included). The others use `sslmode=no-verify` (TLS
// without verification) so that they check the types whatever that one says.
import pg from "pg";

import { Checks, expectEqual, uriFromEnv } from "./harness.mjs";

const URI_AS_GIVEN = uriFromEnv();
const URI = URI_AS_GIVEN.replace("sslmode=prefer", "sslmode=no-verify");
const ROOT_CERT = process.env.CLIENTS_PG_ROOT_CERT ?? "";
/** The string as given, with the server's CA certificate when it has one. */
const URI_VERIFIED = ROOT_CERT
  ? `${URI_AS_GIVEN}${URI_AS_GIVEN.includes("?") ? "&" : "?"}sslrootcert=${encodeURIComponent(ROOT_CERT)}`
  : URI_AS_GIVEN;

async function withClient(fn, connectionString = URI) {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 10000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Inserts `sent` into a `columnType` column with a parameter and expects `want` back from the column. */
function roundTrip(name, columnType, sent, want) {
  return withClient(async (client) => {
    const table = `rtn_${name}`;
    await client.query(`DROP TABLE IF EXISTS ${table}`);
    await client.query(`CREATE TABLE ${table} (id serial PRIMARY KEY, v ${columnType})`);
    const inserted = await client.query(`INSERT INTO ${table} (v) VALUES ($1) RETURNING id`, [sent]);
    expectEqual("RETURNING id", inserted.rows[0].id, 1);
    const read = await client.query(`SELECT v FROM ${table} WHERE id = $1`, [1]);
    expectEqual(`${columnType} column read back`, read.rows[0].v, want);
  });
}

/** After `roundTrip`: the row is found by `WHERE v <operator> $1` with `sent` (pg sends parameters untyped,
 * so the server takes the parameter's type from the column's). */
function whereParam(name, columnType, sent, operator) {
  return withClient(async (client) => {
    const found = await client.query(`SELECT count(*) AS n FROM rtn_${name} WHERE v ${operator} $1`, [sent]);
    expectEqual(`rows of the ${columnType} column where v ${operator} the parameter`, found.rows[0].n, "1");
  });
}

/** `roundTrip`, then `whereParam` with `=` and with `IS NOT DISTINCT FROM`, each a check run if the first passed. */
async function typeChecks(name, columnType, sent, want) {
  await checks.run(name, () => roundTrip(name, columnType, sent, want));
  await checks.run(`${name}.where_param`, () => whereParam(name, columnType, sent, "="), [name]);
  await checks.run(`${name}.distinct_param`, () => whereParam(name, columnType, sent, "IS NOT DISTINCT FROM"), [name]);
}

const when = new Date("2024-02-29T13:14:15.123Z");
const bytes = Buffer.from([0, 1, 39, 92, 255, 32, 98]);
const checks = new Checks("node_pg");
await checks.run("connect_as_given", () =>
  withClient(async (client) => {
    expectEqual("SELECT 1", (await client.query("SELECT 1 AS one")).rows[0].one, 1);
  }, URI_VERIFIED),
);
await checks.run("connect", () =>
  withClient(async (client) => {
    const result = await client.query("SELECT 1 AS one, current_setting('server_version_num') AS v");
    expectEqual("SELECT 1", result.rows[0].one, 1);
    if (Number(result.rows[0].v) < 150000) throw new Error(`server_version_num ${result.rows[0].v}`);
  }),
);
await typeChecks("int4", "integer", 42, 42);
await typeChecks("int8", "bigint", "9007199254740993", "9007199254740993");
await typeChecks("bool", "boolean", true, true);
await typeChecks("bytea", "bytea", bytes, bytes);
await typeChecks("timestamptz", "timestamptz", when, when);
await typeChecks("text", "text", "h\u00e9llo 'q' \\", "h\u00e9llo 'q' \\");
await typeChecks("numeric", "numeric(12,3)", "12345.678", "12345.678");
await typeChecks("json", "jsonb", { a: [1, true, null] }, { a: [1, true, null] });
await checks.run("count_is_string", () =>
  withClient(async (client) => {
    // count(*) is bigint: pg gives it as a string, which code that does `Number(row.count)` relies on.
    const result = await client.query("SELECT count(*) AS n FROM (VALUES (1), (2)) AS v(x)");
    expectEqual("count(*)", result.rows[0].n, "2");
  }),
);
