// drizzle against two Cambium databases, in its two workflows. On CLIENTS_URI: `drizzle-kit push` of
// drizzle/schema.js (it introspects the database, then creates the tables, the foreign key and the indexes) and a
// second push that finds no changes (the introspection reads back what the first made). On CLIENTS_URI2:
// `drizzle-kit generate` (SQL from the schema, offline), drizzle-orm's migrator applying it, then CRUD through
// drizzle-orm's node-postgres driver with a relational query (see ensureTables for when the migrator failed). Run from a directory whose node_modules has pg,
// drizzle-orm and drizzle-kit.
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { and, asc, count, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/node-postgres";
import { migrate } from "drizzle-orm/node-postgres/migrator";
import pg from "pg";

import * as schema from "./drizzle/schema.js";
import { Checks, expectEqual, oneLine, uriFromEnv } from "./harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
// pg verifies the certificate for sslmode=prefer: see pg_check.mjs.
const URI = uriFromEnv().replace("sslmode=prefer", "sslmode=no-verify");
const URI2 = (process.env.CLIENTS_URI2 ?? "").replace("sslmode=prefer", "sslmode=no-verify");
if (!URI2) {
  console.error("CLIENTS_URI2 is not set");
  process.exit(2);
}
const PUSH_TIMEOUT_MS = 120_000;

/** Runs `drizzle-kit <command> --config …` (`push --force` against CLIENTS_URI, or `generate`); its output
 * without the spinner's redraws. Throws with the first failed query (from log_pg_errors.cjs) or the output's tail
 * when it exits non-zero. */
function drizzleKit(...command) {
  const run = spawnSync(
    path.join(here, "node_modules", ".bin", "drizzle-kit"),
    [...command, "--config", "drizzle/drizzle.config.js"],
    {
      cwd: here,
      encoding: "utf8",
      timeout: PUSH_TIMEOUT_MS,
      env: {
        ...process.env,
        CLIENTS_DRIZZLE_URI: URI,
        NODE_OPTIONS: `--require ${path.join(here, "log_pg_errors.cjs")}`,
      },
    },
  );
  const output = `${run.stdout}\n${run.stderr}`.replace(/\x1b\[[0-9;]*[A-Za-z]/g, "").replace(/\r/g, "\n");
  process.stderr.write(output);
  if (run.error) throw run.error;
  if (run.status !== 0) {
    const failed = output.split("\n").find((line) => line.startsWith("pg query failed: "));
    const tail = output.split("\n").filter((line) => line.trim() && !line.includes("Pulling schema")).slice(-3);
    throw new Error(`drizzle-kit ${command[0]} exited with ${run.status}: ${failed ?? oneLine(tail.join(" | "))}`);
  }
  return output;
}

/** Runs `fn` with a drizzle database on CLIENTS_URI2. */
async function withDb(fn) {
  const pool = new pg.Pool({ connectionString: URI2, max: 2, connectionTimeoutMillis: 10000 });
  try {
    return await fn(drizzle(pool, { schema }));
  } finally {
    await pool.end();
  }
}

async function migrateGenerated() {
  await withDb(async (db) => {
    await migrate(db, { migrationsFolder: path.join(here, "drizzle", "out") });
    const tables = await db.execute(
      sql`SELECT table_name FROM information_schema.tables WHERE table_name IN ('dz_users', 'dz_posts') ORDER BY 1`,
    );
    expectEqual("tables made by the migrator", tables.rows.map((r) => r.table_name), ["dz_posts", "dz_users"]);
  });
}

/** The tables of the schema on CLIENTS_URI2: those the migrator made, or, when it failed, made here by running the
 * generated SQL statement by statement as the migrator does (without its bookkeeping table), so that the ORM's
 * queries are checked whatever the migrator's own needs hit. */
async function ensureTables(db) {
  const existing = await db.execute(sql`SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'dz_posts'`);
  if (Number(existing.rows[0].n) > 0) return;
  const folder = path.join(here, "drizzle", "out");
  for (const file of readdirSync(folder).filter((name) => name.endsWith(".sql")).sort()) {
    for (const statement of readFileSync(path.join(folder, file), "utf8").split("--> statement-breakpoint")) {
      if (statement.trim()) await db.execute(sql.raw(statement));
    }
  }
}

async function crud() {
  await withDb(async (db) => {
    await ensureTables(db);
    const [ada] = await db.insert(schema.users).values({ email: "ada@example.com", name: "Ada" }).returning();
    expectEqual("serial id returned", ada.id, 1);
    expectEqual("boolean default", ada.admin, false);
    if (!(ada.createdAt instanceof Date)) throw new Error(`created_at: got ${ada.createdAt}, want a Date`);
    const [bob] = await db.insert(schema.users).values({ email: "bob@example.com", admin: true }).returning();
    await db.insert(schema.posts).values([
      { authorId: ada.id, title: "first", score: "4.50", tags: ["a", "b"] },
      { authorId: ada.id, title: "second" },
      { authorId: bob.id, title: "third", score: "1.25" },
    ]);
    const adaPosts = await db
      .select({ title: schema.posts.title, score: schema.posts.score, tags: schema.posts.tags })
      .from(schema.posts)
      .innerJoin(schema.users, eq(schema.posts.authorId, schema.users.id))
      .where(and(eq(schema.users.email, "ada@example.com"), eq(schema.users.admin, false)))
      .orderBy(asc(schema.posts.id));
    expectEqual("a join with a where", adaPosts, [
      { title: "first", score: "4.50", tags: ["a", "b"] },
      { title: "second", score: null, tags: [] },
    ]);
    const withPosts = await db.query.users.findMany({ with: { posts: { columns: { title: true } } }, orderBy: asc(schema.users.id) });
    expectEqual(
      "a relational query",
      withPosts.map((u) => [u.email, u.posts.map((p) => p.title).sort()]),
      [["ada@example.com", ["first", "second"]], ["bob@example.com", ["third"]]],
    );
    await db.update(schema.posts).set({ score: sql`${schema.posts.score} + 1` }).where(eq(schema.posts.authorId, bob.id));
    const [third] = await db.select().from(schema.posts).where(eq(schema.posts.title, "third"));
    expectEqual("updated score", third.score, "2.25");
    await db.delete(schema.users).where(eq(schema.users.id, ada.id));
    const [{ posts }] = await db.select({ posts: count() }).from(schema.posts);
    expectEqual("posts left after deleting their author (on delete cascade)", posts, 1);
  });
}

const checks = new Checks("drizzle");
await checks.run("push", () => {
  const output = drizzleKit("push", "--force");
  if (!output.includes("Changes applied")) throw new Error(`push did not apply the schema: ${oneLine(output.slice(-300))}`);
});
await checks.run(
  "push_again",
  () => {
    const output = drizzleKit("push", "--force");
    if (!output.includes("No changes detected")) {
      throw new Error(`a second push found changes: ${oneLine(output.slice(-300))}`);
    }
  },
  ["push"],
);
await checks.run("generate", () => {
  const output = drizzleKit("generate", "--name", "initial");
  if (!/Your SQL migration file.*initial\.sql/.test(output)) {
    throw new Error(`generate wrote no migration: ${oneLine(output.slice(-300))}`);
  }
});
await checks.run("migrate", migrateGenerated, ["generate"]);
await checks.run("crud", crud, ["generate"]);

// Every check has printed its result: end here, so a connection a failed check left open cannot hold the run
// until the program timeout.
process.exit(0);
