// The check protocol of scripts/clients.sh for the Node clients (as py/harness.py): each check prints one line,
// `PASS <name>` or `FAIL <name>: <error on one line>`; a check whose dependency failed is printed as not run.
import assert from "node:assert/strict";

const ERROR_CHARS_MAX = 400;

/** `text` on one line, whitespace collapsed, at most ERROR_CHARS_MAX characters. */
export function oneLine(text) {
  const flat = String(text).replace(/\s+/g, " ").trim();
  return flat.length > ERROR_CHARS_MAX ? `${flat.slice(0, ERROR_CHARS_MAX - 3)}...` : flat;
}

/** An error as `Type [SQLSTATE]: message`, the SQLSTATE when the server sent one, followed by the error it
 * wraps (drizzle wraps the driver's). */
export function describe(error) {
  if (error instanceof Error) {
    const state = error.code && /^[0-9A-Z]{5}$/.test(error.code) ? ` [${error.code}]` : "";
    const cause = error.cause instanceof Error ? ` <- ${describe(error.cause)}` : "";
    return `${error.name}${state}: ${error.message}${cause}`;
  }
  return String(error);
}

export class Checks {
  constructor(prefix) {
    this.prefix = prefix;
    this.failed = new Set();
  }

  /** Runs `fn` as check `<prefix>.<name>`; false if it failed or one of `needs` had. */
  async run(name, fn, needs = []) {
    const full = `${this.prefix}.${name}`;
    const missing = needs.find((n) => this.failed.has(`${this.prefix}.${n}`));
    if (missing) {
      this.failed.add(full);
      console.log(`FAIL ${full}: not run: ${this.prefix}.${missing} failed`);
      return false;
    }
    try {
      await fn();
    } catch (error) {
      this.failed.add(full);
      console.log(`FAIL ${full}: ${oneLine(describe(error))}`);
      console.error(error);
      return false;
    }
    console.log(`PASS ${full}`);
    return true;
  }
}

/** Throws naming `what` unless `got` deeply and strictly equals `want`. */
export function expectEqual(what, got, want) {
  try {
    assert.deepStrictEqual(got, want);
  } catch {
    throw new Error(`${what}: got ${show(got)} (${typeof got}), want ${show(want)} (${typeof want})`);
  }
}

function show(value) {
  if (Buffer.isBuffer(value)) return `Buffer<${value.toString("hex")}>`;
  if (value instanceof Date) return `Date(${value.toISOString()})`;
  return JSON.stringify(value);
}

/** The connection string the checks run against (CLIENTS_URI, with the password). */
export function uriFromEnv() {
  const uri = process.env.CLIENTS_URI;
  if (!uri) {
    console.error("CLIENTS_URI is not set");
    process.exit(2);
  }
  return uri;
}
