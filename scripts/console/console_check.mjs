// The console's checks in headless Chromium (run by scripts/console.sh, which sets the environment): each check
// drives the page as a person would (clicks, typing, the keyboard) and asserts the DOM, printing PASS or FAIL;
// the story stops at the first failure, since later checks need earlier ones. Screenshots in CONSOLE_SHOTS.
import puppeteer from "puppeteer-core";

const env = (name) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const url = env("CONSOLE_URL");
const key = env("CONSOLE_KEY");
const shots = env("CONSOLE_SHOTS");
const libs = process.env.CONSOLE_CHROMIUM_LIBS || "";
const WAIT_MS = 60_000;

let browser;
try {
  browser = await puppeteer.launch({
    executablePath: env("CONSOLE_CHROMIUM_BIN"),
    headless: true,
    // As root in a container Chromium's sandbox cannot start; /dev/shm may be small.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--lang=en-US"],
    env: { ...process.env, ...(libs ? { LD_LIBRARY_PATH: libs } : {}), TZ: "UTC" },
  });
} catch (error) {
  console.log(`FAIL chromium starts: ${String(error.message).split("\n").slice(0, 4).join(" ")}`);
  console.log("console: 0 passed, 1 failed");
  process.exit(1);
}
const page = await browser.newPage();
await page.setViewport({ width: 1400, height: 1000 });
const pageErrors = [];
page.on("pageerror", (error) => pageErrors.push(String(error)));
// Chromium logs every 4xx answer as an error; the checks look at what the page shows for those instead.
page.on("console", (message) => {
  if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) pageErrors.push(message.text());
});

let passed = 0;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    if (pageErrors.length) throw new Error(`the page logged errors: ${pageErrors.splice(0).join(" | ")}`);
    passed++;
    console.log(`PASS ${name}`);
  } catch (error) {
    failed++;
    console.log(`FAIL ${name}: ${String(error && error.message ? error.message : error).split("\n")[0]}`);
    await page.screenshot({ path: `${shots}/failed.png`, fullPage: true }).catch(() => {});
    throw error;
  }
}
const assert = (condition, message) => { if (!condition) throw new Error(message); };
const text = (selector) => page.$eval(selector, (node) => node.textContent);
const waitText = (selector, wanted) => page.waitForFunction(
  (s, w) => { const n = document.querySelector(s); return n && n.textContent.includes(w); },
  { timeout: WAIT_MS }, selector, wanted);
async function fill(selector, value) {
  await page.$eval(selector, (node) => { node.value = ""; });
  await page.type(selector, value);
}
async function setValue(selector, value) {
  await page.$eval(selector, (node, v) => {
    node.value = v;
    node.dispatchEvent(new Event("input", { bubbles: true }));
  }, value);
}
async function runSql(query) {
  await page.$eval("#sql-query", (node) => { node.value = ""; });
  await page.type("#sql-query", query);
  await page.$eval("#sql-result", (node) => node.replaceChildren());
  await page.click("#sql-run");
  await page.waitForFunction(() => {
    const result = document.querySelector("#sql-result");
    return result.children.length && !result.textContent.includes("Running");
  }, { timeout: WAIT_MS });
  return text("#sql-result");
}
const lanes = () => page.$$eval("#branch-tree g.lane", (nodes) =>
  nodes.map((n) => ({ id: n.dataset.branchId, label: n.getAttribute("aria-label"), classes: n.getAttribute("class") })));

try {
  await check("the page loads with its assets, the sign-in form labelled", async () => {
    const response = await page.goto(url, { waitUntil: "networkidle0" });
    assert(response.ok(), `GET ${url}: ${response.status()}`);
    const csp = response.headers()["content-security-policy"] || "";
    assert(csp.includes("default-src 'none'"), `a content security policy: ${csp}`);
    assert(await page.$eval("label[for=api-key]", (n) => n.textContent) === "API key", "the key field is labelled");
    assert(await page.$eval("#app", (n) => n.hidden), "the app waits for sign-in");
  });

  await check("a wrong key is refused with the API's message and request id", async () => {
    await fill("#api-key", "cmb_wrong");
    await page.click("#signin-form button[type=submit]");
    await waitText("#signin-error", "HTTP 401");
    assert((await text("#signin-error")).includes("request req_"), "the request id");
  });

  await check("the right key signs in", async () => {
    await fill("#api-key", key);
    await page.click("#signin-form button[type=submit]");
    await page.waitForSelector("#app:not([hidden])", { timeout: WAIT_MS });
    assert(await page.evaluate(() => sessionStorage.getItem("cambium.key")) === key, "kept in sessionStorage");
    assert(await page.evaluate(() => localStorage.length) === 0, "nothing in localStorage");
  });

  await check("a project is created and picked", async () => {
    await fill("#new-project-name", "shop");
    await page.click("#project-form button");
    await page.waitForSelector("#project-list button[aria-current=true]", { timeout: WAIT_MS });
    assert((await text("#project-list button[aria-current=true]")) === "shop", "the new project is current");
  });

  await check("a database is created: its password shown once, its operation finishes live", async () => {
    await fill("#new-database-name", "orders");
    await page.click("#database-form button");
    await page.waitForSelector("#secret-dialog[open]", { timeout: WAIT_MS });
    assert(/postgresql:\/\/cambium:[^@]+@/.test(await text("#secret-uri")), "the connection string with its password");
    await page.click("#secret-ok");
    await page.waitForSelector("#operation-list li[data-status=finished]", { timeout: WAIT_MS });
    assert((await text("#operation-list li")).includes("create database"), "the operation is listed");
    await waitText("#database-status", "active");
    assert((await text("#database-uri")).includes("/db_"), "the connection string is shown");
  });

  let before;
  await check("SQL runs on the default branch", async () => {
    const out = await runSql("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\n" +
      "INSERT INTO items VALUES (1, 'apple'), (2, 'pear')");
    assert(out.includes("OK") && !out.includes("("), `no error: ${out}`);
    await new Promise((r) => setTimeout(r, 1200));
    before = await page.evaluate(() => localValue(new Date()));
    await new Promise((r) => setTimeout(r, 1200));
    const deleted = await runSql("DELETE FROM items WHERE id = 2");
    assert(deleted.includes("OK, 1 row"), deleted);
    const rows = await runSql("SELECT name FROM items ORDER BY id");
    assert(rows.includes("apple") && !rows.includes("pear"), rows);
  });

  await check("a branch made from the tree's default branch appears in the tree", async () => {
    const [main] = await lanes();
    assert(main && main.label.includes("branch main") && main.classes.includes("default"), JSON.stringify(main));
    await page.click(`#branch-tree g.lane[data-branch-id="${main.id}"]`);
    await waitText("#branch-title", "Branch main");
    await fill("#child-name", "dev");
    await page.click("#child-form button");
    await waitText("#branch-title", "Branch dev");
    const after = await lanes();
    const dev = after.find((lane) => lane.label.startsWith("branch dev"));
    assert(after.length === 2 && dev, JSON.stringify(after));
    assert(dev.label.includes("forked at "), dev.label);
    assert(await page.$eval(`#branch-tree g.lane[data-branch-id="${dev.id}"] path.fork`, (n) => !!n), "a fork line");
    await page.screenshot({ path: `${shots}/branch-tree.png`, fullPage: true });
  });

  await check("the keyboard selects a branch in the tree", async () => {
    const [main] = await lanes();
    // Tab order reaches the lanes (tabindex 0); focus one the way Tab would land on it, then press Enter.
    await page.$eval(`#branch-tree g.lane[data-branch-id="${main.id}"]`, (node) => node.focus());
    assert(await page.evaluate(() => document.activeElement.getAttribute("tabindex") === "0"), "the lane has focus");
    await page.keyboard.press("Enter");
    await waitText("#branch-title", "Branch main");
  });

  await check("the restore picker previews the tables and row counts then and now", async () => {
    await setValue("#restore-time", before);
    await page.click("#restore-preview-button");
    await page.waitForSelector("#restore-preview table", { timeout: WAIT_MS });
    const cells = await page.$$eval("#restore-preview tbody td", (nodes) => nodes.map((n) => n.textContent));
    assert(JSON.stringify(cells) === JSON.stringify(["items", "2", "1"]), `items: 2 then, 1 now: ${cells}`);
    assert(!(await page.$eval("#restore-button", (n) => n.disabled)), "restore enabled after the preview");
    await page.screenshot({ path: `${shots}/restore-preview.png`, fullPage: true });
  });

  await check("a query at a point in time reads the branch as it was, read-only", async () => {
    await setValue("#sql-at", before);
    await runSql("SELECT count(*) AS n FROM items");
    const cells = await page.$$eval("#sql-result td", (nodes) => nodes.map((n) => n.textContent));
    assert(JSON.stringify(cells) === '["2"]', `2 rows then: ${await text("#sql-result")}`);
    const write = await runSql("INSERT INTO items VALUES (3, 'fig')");
    // Refused (today with SQLite's "readonly database", XX000, where PostgreSQL would say 25006).
    assert(await page.$("#sql-result p.error") && !write.includes("OK"), `a write at a point in time fails: ${write}`);
    await setValue("#sql-at", "");
  });

  await check("the restore is confirmed, its operation finishes, the kept branch joins the tree", async () => {
    await page.click("#restore-button");
    await page.waitForSelector("#confirm-dialog[open]", { timeout: WAIT_MS });
    await page.click("#confirm-ok");
    await page.waitForFunction(() => [...document.querySelectorAll("#operation-list li")]
      .some((li) => li.textContent.includes("restore branch") && li.dataset.status === "finished"), { timeout: WAIT_MS });
    await page.waitForFunction(() => document.querySelectorAll("#branch-tree g.lane").length === 3, { timeout: WAIT_MS });
    const kept = (await lanes()).find((lane) => lane.classes.includes("backup"));
    assert(kept && kept.label.includes("main_before_restore_"), JSON.stringify(await lanes()));
    assert(await page.$("#branch-tree path.restored"), "the restore is marked on main's line");
    // The picture the README shows (docs/console-tree.png is a copy of this one).
    await (await page.$("#tree-panel")).screenshot({ path: `${shots}/tree.png` });
  });

  await check("a query on the restored branch sees the row again", async () => {
    const rows = await runSql("SELECT name FROM items ORDER BY id");
    assert(rows.includes("apple") && rows.includes("pear"), rows);
    await page.screenshot({ path: `${shots}/console.png`, fullPage: true });
  });

  const selectLane = async (name) => {
    const lane = (await lanes()).find((l) => l.label.startsWith(`branch ${name},`));
    assert(lane, `a lane for ${name}: ${JSON.stringify(await lanes())}`);
    await page.click(`#branch-tree g.lane[data-branch-id="${lane.id}"]`);
    await waitText("#branch-title", `Branch ${name}`);
    return lane;
  };

  await check("a branch's labels and expiry are set and shown, in its facts and the tree", async () => {
    await selectLane("dev");
    await fill("#branch-labels-input", "pr=42, team=web");
    await page.click("#labels-form button[type=submit]");
    await waitText("#branch-labels", "pr=42, team=web");
    const tomorrow = await page.evaluate(() => localValue(new Date(Date.now() + 86400000)));
    await setValue("#branch-expires-at", tomorrow);
    await page.click("#expiry-form button[type=submit]");
    await page.waitForFunction(() => document.querySelector("#branch-expires").textContent !== "never", { timeout: WAIT_MS });
    const dev = (await lanes()).find((l) => l.label.startsWith("branch dev,"));
    assert(dev.label.includes("labels pr=42, team=web") && dev.label.includes("expires "), dev.label);
    assert(await page.$(`#branch-tree g.lane[data-branch-id="${dev.id}"] line.expiry`), "the expiry is drawn");
    await page.click("#branch-expiry-clear");
    await waitText("#branch-expires", "never");
  });

  const main = async () => (await lanes()).find((l) => l.label.startsWith("branch main,"));
  const diffAgainstMain = async () => {
    await page.select("#diff-base", (await main()).id);
    await page.$eval("#diff-result", (node) => node.replaceChildren());
    await page.click("#diff-button");
    await page.waitForFunction(() => document.querySelector("#diff-result").children.length, { timeout: WAIT_MS });
    return text("#diff-result");
  };

  await check("a migration on a branch shows in its schema diff against main", async () => {
    const out = await runSql("ALTER TABLE items ADD COLUMN price INTEGER");
    assert(out.includes("OK"), `the migration runs on dev: ${out}`);
    const diff = await diffAgainstMain();
    const cells = await page.$$eval("#diff-result tbody td", (nodes) => nodes.map((n) => n.textContent));
    assert(JSON.stringify(cells) === '["added","column","items.price"]', `one added column: ${cells} (${diff})`);
    const added = await page.$$eval("#diff-result pre.diff span.add", (nodes) => nodes.map((n) => n.textContent));
    assert(added.some((line) => line.startsWith("+") && !line.startsWith("+++") && line.includes("price")), diff);
    await page.screenshot({ path: `${shots}/schema-diff.png`, fullPage: true });
  });

  await check("a reset from the parent finishes live and discards the branch's migration", async () => {
    await page.click("#branch-reset");
    await page.waitForSelector("#confirm-dialog[open]", { timeout: WAIT_MS });
    await page.click("#confirm-ok");
    await page.waitForFunction(() => [...document.querySelectorAll("#operation-list li")]
      .some((li) => li.textContent.includes("reset branch") && li.dataset.status === "finished"), { timeout: WAIT_MS });
    await waitText("#branch-title", "Branch dev");
    const diff = await diffAgainstMain();
    assert(diff.includes("No schema changes"), diff);
  });

  await check("a protected branch shows as protected and cannot be deleted or reset from the page", async () => {
    await selectLane("dev");
    await page.click("#branch-protect");
    await waitText("#branch-protected", "yes");
    assert(await page.$eval("#branch-delete", (n) => n.disabled), "delete is disabled");
    assert(await page.$eval("#branch-reset", (n) => n.disabled), "reset is disabled");
    assert((await text("#branch-protect")) === "Unprotect", "the button now unprotects");
    const dev = (await lanes()).find((l) => l.label.startsWith("branch dev,"));
    assert(dev.label.includes("protected"), dev.label);
    await page.click("#branch-protect");
    await page.waitForFunction(() => document.querySelector("#branch-protected").textContent === "no", { timeout: WAIT_MS });
    assert(!(await page.$eval("#branch-delete", (n) => n.disabled)), "delete is enabled again");
  });

  await check("at a phone's width nothing is wider than the screen", async () => {
    await page.setViewport({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    // The innermost boxes whose content is wider than they are (and not scrolled), to say what to fix.
    const wide = await page.evaluate(() => [...document.querySelectorAll("body *")]
      .filter((n) => n.scrollWidth > n.clientWidth + 1 && getComputedStyle(n).overflowX === "visible")
      .slice(-3).map((n) => `${n.tagName.toLowerCase()}${n.id ? "#" + n.id : ""}: ${n.scrollWidth}px in ${n.clientWidth}px`)
      .join(", "));
    assert(overflow <= 1, `the page is ${overflow}px wider than the screen (${wide})`);
    await page.screenshot({ path: `${shots}/phone.png`, fullPage: true });
  });
} catch {
  // The failing check printed its line; the rest depend on it.
} finally {
  await browser.close();
}
console.log(`console: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
