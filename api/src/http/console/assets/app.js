// The Cambium console: plain JavaScript over the /v1 API (same origin, the API key from sign-in in this tab's
// sessionStorage) and /console/sql (SQL through Cambium's PostgreSQL listener, with the database's password).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const KEY_ITEM = "cambium.key";
const PASSWORDS_ITEM = "cambium.passwords";
const LONG_POLL = "25s";
const IDLE_POLL_MS = 3000;
const PREVIEW_TABLES_MAX = 50;

const state = {
  key: sessionStorage.getItem(KEY_ITEM),
  project: null,
  databases: [],
  database: null,
  branches: [],
  branch: null,
  operations: [],
  watch: 0, // the operations loop's generation: a new project starts a new loop, the old one ends
  wake: null, // resolves the operations loop's idle wait, so an action shows at once
};

const $ = (id) => document.getElementById(id);

// ---- the API ----

class ApiError extends Error {
  constructor(status, code, message, requestId) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
  toString() {
    return `${this.message} (HTTP ${this.status}, ${this.code}${this.requestId ? ", request " + this.requestId : ""})`;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const json = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = (json && json.error) || {};
    throw new ApiError(response.status, error.code || `http_${response.status}`, error.message || text,
      error.request_id || response.headers.get("x-request-id"));
  }
  return json;
}

async function listAll(path, key) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < 20; page++) {
    const reply = await api("GET", `${path}?limit=500${cursor ? "&cursor=" + cursor : ""}`);
    items.push(...reply[key]);
    cursor = reply.next_cursor;
    if (!cursor) break;
  }
  return items;
}

function passwords() {
  try { return JSON.parse(sessionStorage.getItem(PASSWORDS_ITEM) || "{}"); } catch { return {}; }
}

function rememberPassword(databaseId, uri) {
  const match = /^postgresql:\/\/[^:@/]+:([^@]+)@/.exec(uri || "");
  if (!match) return;
  const all = passwords();
  all[databaseId] = decodeURIComponent(match[1]);
  sessionStorage.setItem(PASSWORDS_ITEM, JSON.stringify(all));
}

async function sql(branchId, at, query) {
  const password = passwords()[state.database.id];
  if (!password) throw new Error("enter the database password first (Database password, above)");
  const body = { branch_id: branchId, password, query };
  if (at) body.at = at;
  return api("POST", "/console/sql", body);
}

// ---- small helpers ----

function say(text) { $("status").textContent = text; }

function fail(error) {
  say(`Error: ${error instanceof ApiError ? error.toString() : error.message || error}`);
}

// Runs an action, reporting its failure in the status line.
function action(fn) {
  return async (event) => {
    if (event) event.preventDefault();
    try { await fn(event); } catch (error) { fail(error); }
  };
}

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

// A datetime-local value (local time) as an RFC 3339 UTC time.
function utc(localValue) {
  const date = new Date(localValue);
  if (Number.isNaN(date.getTime())) throw new Error(`not a time: ${localValue}`);
  return date.toISOString();
}

// A time as a datetime-local value (local time, seconds).
function localValue(date) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:` +
    `${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

function confirmDialog(text) {
  return new Promise((resolve) => {
    const dialog = $("confirm-dialog");
    $("confirm-text").textContent = text;
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    $("confirm-cancel").focus();
  });
}

function pickList(list, items, current, label, onPick) {
  list.replaceChildren(...items.map((item) => el("li", {}, el("button", {
    type: "button",
    "aria-current": String(current === item.id),
    "data-id": item.id,
    text: label(item),
    onclick: action(() => onPick(item)),
  }))));
}

// ---- sign in ----

async function signIn(key) {
  state.key = key;
  await api("GET", "/v1/projects?limit=1"); // a bad key is 401 here
  sessionStorage.setItem(KEY_ITEM, key);
  $("signin").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  await loadProjects();
  say("Signed in.");
}

function signOut() {
  sessionStorage.clear();
  location.reload();
}

// ---- projects and databases ----

async function loadProjects() {
  const projects = await listAll("/v1/projects", "projects");
  pickList($("project-list"), projects, state.project && state.project.id, (p) => p.name, selectProject);
  if (!state.project && projects.length) await selectProject(projects[0]);
}

async function selectProject(project) {
  state.project = project;
  state.database = null;
  $("database-panel").hidden = true;
  $("database-form").hidden = false;
  await loadProjects();
  await loadDatabases();
  watchOperations();
}

async function loadDatabases() {
  state.databases = await listAll(`/v1/projects/${state.project.id}/databases`, "databases");
  $("databases-empty").textContent = state.databases.length ? "" : "No database yet.";
  pickList($("database-list"), state.databases, state.database && state.database.id,
    (d) => `${d.name} (${d.status})`, selectDatabase);
}

async function selectDatabase(database) {
  state.database = database;
  state.branch = null;
  $("database-panel").hidden = false;
  $("branch-panel").hidden = true;
  await refreshDatabase();
  pickList($("database-list"), state.databases, database.id, (d) => `${d.name} (${d.status})`, selectDatabase);
}

async function refreshDatabase() {
  const database = (await api("GET", `/v1/databases/${state.database.id}`)).database;
  state.database = database;
  $("database-title").textContent = `Database ${database.name}`;
  $("database-status").textContent = database.status;
  $("database-id").textContent = database.id;
  $("database-uri").textContent = database.connection_uri;
  $("database-password").value = passwords()[database.id] || "";
  await loadBranches();
}

async function loadBranches() {
  state.branches = await listAll(`/v1/databases/${state.database.id}/branches`, "branches");
  if (state.branch) state.branch = state.branches.find((b) => b.id === state.branch.id) || null;
  drawTree();
  pickList($("branch-list"), state.branches, state.branch && state.branch.id, (b) => b.name, selectBranch);
  const select = $("sql-branch");
  const chosen = select.value;
  select.replaceChildren(...state.branches.map((b) => el("option", { value: b.id, text: b.name })));
  if (state.branches.some((b) => b.id === chosen)) select.value = chosen;
  if (state.branch) showBranch(); else $("branch-panel").hidden = true;
}

async function createDatabase(name) {
  const reply = await api("POST", `/v1/projects/${state.project.id}/databases`, { name });
  rememberPassword(reply.database.id, reply.database.connection_uri);
  $("secret-uri").textContent = reply.database.connection_uri;
  $("secret-dialog").showModal();
  say(`Creating database ${name}…`);
  wakeOperations();
  await loadDatabases();
  await selectDatabase(reply.database);
}

// ---- the branch tree, drawn against time ----

// Branches in tree order (each after its parent, siblings oldest first), with their depth.
function treeOrder(branches) {
  const byParent = new Map();
  const ids = new Set(branches.map((b) => b.id));
  for (const branch of branches) {
    const parent = branch.parent_branch_id && ids.has(branch.parent_branch_id) ? branch.parent_branch_id : null;
    if (!byParent.has(parent)) byParent.set(parent, []);
    byParent.get(parent).push(branch);
  }
  const out = [];
  const visit = (parent) => {
    const children = (byParent.get(parent) || []).sort((a, b) => a.created_at.localeCompare(b.created_at));
    for (const child of children) { out.push(child); visit(child.id); }
  };
  visit(null);
  return out;
}

function drawTree() {
  const tree = $("branch-tree");
  const branches = treeOrder(state.branches);
  // Drawn at the size it is shown (1:1), so text stays its CSS size at any width.
  const width = Math.max(tree.parentElement.clientWidth - 2, 560), left = 16, right = 24, top = 34, lane = 44;
  const height = top + lane * Math.max(branches.length, 1) + 6;
  tree.setAttribute("viewBox", `0 0 ${width} ${height}`);
  tree.setAttribute("height", height);
  const now = Date.now();
  const first = Math.min(...branches.map((b) => Date.parse(b.created_at)), now);
  const start = first - Math.max((now - first) * 0.04, 1000);
  const span = Math.max(now - start, 1000);
  const x = (t) => left + ((Math.min(t, now) - start) / span) * (width - left - right);
  const nodes = [svg("line", { class: "axis", x1: left, y1: 20, x2: width - right, y2: 20 })];
  for (let i = 0; i <= 4; i++) {
    const t = start + (span * i) / 4;
    const label = span < 86400000 ? new Date(t).toLocaleTimeString() : new Date(t).toLocaleDateString();
    const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle";
    nodes.push(svg("text", { class: "tick", x: x(t), y: 14, "text-anchor": anchor }, label));
  }
  const rowOf = new Map(branches.map((b, i) => [b.id, top + lane * i + lane / 2 + 6]));
  // A branch's history begins before it was made when children were forked from it earlier (a restore keeps
  // the old state as a new branch and moves the children onto it), and a kept state with no parent holds its
  // branch's history from the database's start.
  const historyStart = new Map(branches.map((b) => [b.id, Date.parse(b.created_at)]));
  for (const b of branches) {
    if (historyStart.has(b.parent_branch_id)) {
      historyStart.set(b.parent_branch_id, Math.min(historyStart.get(b.parent_branch_id), Date.parse(b.created_at)));
    }
    if (!b.parent_branch_id && /_before_(restore|reset)_/.test(b.name)) historyStart.set(b.id, first);
  }
  // Where each branch was restored: the time its kept state was made.
  const restores = [];
  for (const b of branches) {
    const match = /^(.*)_before_(restore|reset)_/.exec(b.name);
    const target = match && branches.find((other) => other.name === match[1]);
    if (target) restores.push({ id: target.id, at: Date.parse(b.created_at), kind: match[2] });
  }
  for (const branch of branches) {
    const y = rowOf.get(branch.id);
    const born = x(Date.parse(branch.created_at));
    const backup = /_before_(restore|reset)_/.test(branch.name);
    const classes = ["lane", branch.is_default ? "default" : "", backup ? "backup" : "",
      state.branch && state.branch.id === branch.id ? "selected" : ""].join(" ").trim();
    const described = [`branch ${branch.name}`, branch.is_default ? "default" : "", backup ? "kept by a restore" : "",
      branch.parent_lsn ? `forked at ${branch.parent_lsn}` : "", `created ${when(branch.created_at)}`,
      branch.protected ? "protected" : "", branch.expires_at ? `expires ${when(branch.expires_at)}` : "",
      labelText(branch.labels) ? `labels ${labelText(branch.labels)}` : ""]
      .filter(Boolean).join(", ");
    const group = svg("g", { class: classes, tabindex: "0", role: "button", "aria-label": described, "data-branch-id": branch.id });
    // The whole row is the target for a pointer, not only the thin line.
    group.append(svg("rect", { class: "hit", x: left, y: y - lane / 2, width: width - left - right, height: lane }));
    // The name above the line where the branch begins; its fork point's LSN below it; tags after the name.
    const tags = [branch.is_default ? "default" : "", backup ? "backup" : "", branch.protected ? "protected" : ""]
      .filter(Boolean).join(", ");
    const anchor = born > width * 0.6 ? "end" : "start";
    const nameX = anchor === "end" ? born - 8 : born + 8;
    if (rowOf.has(branch.parent_branch_id)) {
      const parentY = rowOf.get(branch.parent_branch_id);
      group.append(svg("path", { class: "fork", d: `M${born} ${parentY} L${born} ${y}` }));
      group.append(svg("text", { class: "lsn", x: nameX, y: y + 15, "text-anchor": anchor }, `at ${branch.parent_lsn || "?"}`));
    }
    const since = x(historyStart.get(branch.id));
    if (since < born) group.append(svg("line", { class: "life history", x1: since, y1: y, x2: born, y2: y }));
    group.append(svg("line", { class: "life", x1: born, y1: y, x2: x(now), y2: y }));
    for (const restored of restores.filter((r) => r.id === branch.id)) {
      const rx = x(restored.at);
      group.append(svg("path", { class: "restored", d: `M${rx} ${y - 7} L${rx + 6} ${y} L${rx} ${y + 7} L${rx - 6} ${y} Z` },
      ));
      group.lastChild.append(svg("title", {}, `${restored.kind}d at ${when(new Date(restored.at).toISOString())}`));
    }
    if (branch.expires_at) {
      group.append(svg("line", { class: "expiry", x1: x(now) - 30, y1: y + 6, x2: x(now), y2: y + 6 }));
      group.append(svg("text", { class: "lsn", x: x(now), y: y + 17, "text-anchor": "end" }, `expires ${when(branch.expires_at)}`));
    }
    group.append(svg("circle", { cx: born, cy: y, r: 6 }));
    group.append(svg("text", { class: "name", x: nameX, y: y - 8, "text-anchor": anchor },
      branch.name + (tags ? ` (${tags})` : "")));
    group.append(svg("title", {}, described));
    group.addEventListener("click", action(() => selectBranch(branch)));
    group.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") action(() => selectBranch(branch))(event);
    });
    nodes.push(group);
  }
  tree.replaceChildren(...nodes);
}

// ---- one branch ----

function selectBranch(branch) {
  state.branch = branch;
  drawTree();
  pickList($("branch-list"), state.branches, branch.id, (b) => b.name, selectBranch);
  $("sql-branch").value = branch.id;
  $("restore-preview").replaceChildren();
  $("restore-button").disabled = true;
  $("diff-result").replaceChildren();
  showBranch();
}

function showBranch() {
  const branch = state.branch;
  const parent = state.branches.find((b) => b.id === branch.parent_branch_id);
  $("branch-panel").hidden = false;
  $("branch-title").textContent = `Branch ${branch.name}${branch.is_default ? " (default)" : ""}`;
  $("branch-id").textContent = branch.id;
  $("branch-parent").textContent = branch.parent_branch_id
    ? `${parent ? parent.name : branch.parent_branch_id} at ${branch.parent_lsn || "?"}` : "(none: the first branch)";
  $("branch-created").textContent = when(branch.created_at);
  $("branch-uri").textContent = branch.connection_uri;
  $("branch-protected").textContent = branch.protected ? "yes: cannot be deleted, restored or reset" : "no";
  $("branch-expires").textContent = branch.expires_at ? when(branch.expires_at) : "never";
  $("branch-labels").textContent = labelText(branch.labels) || "(none)";
  $("branch-promote").disabled = branch.is_default;
  $("branch-protect").textContent = branch.protected ? "Unprotect" : "Protect";
  $("branch-protect").setAttribute("aria-pressed", String(branch.protected));
  $("branch-delete").disabled = branch.is_default || branch.protected;
  $("branch-reset").disabled = !branch.parent_branch_id || branch.protected;
  $("branch-expires-at").value = branch.expires_at ? localValue(new Date(branch.expires_at)) : "";
  $("branch-expiry-clear").disabled = !branch.expires_at;
  $("branch-labels-input").value = labelText(branch.labels);
  if (!$("restore-time").value) $("restore-time").value = localValue(new Date(Date.now() - 60000));
  const base = $("diff-base");
  const others = state.branches.filter((b) => b.id !== branch.id);
  const chosen = base.value;
  base.replaceChildren(...others.map((b) => el("option", {
    value: b.id, text: b.id === branch.parent_branch_id ? `${b.name} (parent)` : b.name })));
  if (others.some((b) => b.id === chosen)) base.value = chosen;
  else if (branch.parent_branch_id && others.some((b) => b.id === branch.parent_branch_id)) base.value = branch.parent_branch_id;
  $("diff-button").disabled = !others.length;
}

// Labels as `key=value, …` (sorted), and back: the text of the labels field as the API's labels object.
function labelText(labels) {
  return Object.entries(labels || {}).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`).join(", ");
}

function parseLabels(text) {
  const labels = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const at = part.indexOf("=");
    if (at <= 0) throw new Error(`a label is key=value: ${part}`);
    labels[part.slice(0, at).trim()] = part.slice(at + 1).trim();
  }
  return labels;
}

// Updates the current branch with `body` (PATCH) and shows it as it now is.
async function updateBranch(body, done) {
  const reply = await api("PATCH", `/v1/branches/${state.branch.id}`, body);
  state.branch = reply.branch;
  await loadBranches();
  say(done(reply.branch));
}

async function resetBranch() {
  const branch = state.branch;
  const parent = state.branches.find((b) => b.id === branch.parent_branch_id);
  const from = parent ? parent.name : "its parent";
  if (!(await confirmDialog(`Reset ${branch.name} to ${from}'s latest state? Its changes are discarded.`))) return;
  const reply = await api("POST", `/v1/branches/${branch.id}/reset`, {});
  say(`Resetting ${branch.name} from ${from}: operation ${reply.operation.id}.`);
  wakeOperations();
}

// The schema differences from the chosen base to this branch: a table of changes and the unified diff.
async function schemaDiff() {
  const branch = state.branch;
  const base = $("diff-base").value;
  const reply = (await api("GET", `/v1/branches/${branch.id}/schema_diff?base_branch_id=${encodeURIComponent(base)}`))
    .schema_diff;
  const baseName = (state.branches.find((b) => b.id === base) || { name: base }).name;
  if (!reply.changes.length) {
    $("diff-result").replaceChildren(el("p", { text: `No schema changes from ${baseName} to ${branch.name}.` }));
    return;
  }
  const table = el("table", { class: "result", "aria-label": `Schema changes from ${baseName} to ${branch.name}` },
    el("thead", {}, el("tr", {}, ...["change", "kind", "name"].map((h) => el("th", { text: h })))),
    el("tbody", {}, ...reply.changes.map((c) => el("tr", {},
      el("td", { text: c.change }), el("td", { text: c.kind }), el("td", { text: c.name })))));
  const diff = el("pre", { class: "diff" }, ...reply.diff.split("\n").map((line) =>
    el("span", { class: line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "", text: line + "\n" })));
  $("diff-result").replaceChildren(
    el("p", { text: `${reply.changes.length} change${reply.changes.length === 1 ? "" : "s"} from ${baseName} ` +
      `(${reply.base_lsn}) to ${branch.name} (${reply.lsn}).` }), table, diff);
}

async function preview() {
  const at = utc($("restore-time").value);
  const branch = state.branch;
  const listing = "SELECT table_schema, table_name FROM information_schema.tables " +
    "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2";
  const then = await sql(branch.id, at, listing);
  if (then.error) throw new Error(`${then.error.message} (${then.error.sqlstate})`);
  const tables = then.statements[0].rows.slice(0, PREVIEW_TABLES_MAX);
  const quote = (name) => `"${name.replace(/"/g, '""')}"`;
  const counts = tables.map(([schema, name]) => `SELECT count(*) FROM ${quote(schema)}.${quote(name)}`).join(";\n");
  const [thenCounts, nowCounts] = tables.length
    ? await Promise.all([sql(branch.id, at, counts), sql(branch.id, null, counts)])
    : [{ statements: [] }, { statements: [] }];
  const count = (reply, i) => (reply.error ? "?" : (reply.statements[i] && reply.statements[i].rows[0][0]) ?? "—");
  const table = el("table", { class: "result", "aria-label": `Tables of ${branch.name} at ${when(at)}` },
    el("thead", {}, el("tr", {}, el("th", { text: "table" }), el("th", { text: "rows then" }), el("th", { text: "rows now" }))),
    el("tbody", {}, ...tables.map(([schema, name], i) => el("tr", {},
      el("td", { text: schema === "public" ? name : `${schema}.${name}` }),
      el("td", { text: count(thenCounts, i) }), el("td", { text: count(nowCounts, i) })))));
  $("restore-preview").replaceChildren(
    el("p", { text: `${branch.name} at ${when(at)}: ${tables.length} table${tables.length === 1 ? "" : "s"}.` }),
    table);
  $("restore-button").disabled = branch.protected;
  if (branch.protected) say(`${branch.name} is protected: unprotect it to restore it.`);
}

async function restore() {
  const at = utc($("restore-time").value);
  const branch = state.branch;
  if (!(await confirmDialog(`Restore ${branch.name} to ${when(at)}? Its current state is kept as a branch.`))) return;
  const reply = await api("POST", `/v1/branches/${branch.id}/restore`, { target_timestamp: at });
  say(`Restoring ${branch.name}: operation ${reply.operation.id}.`);
  $("restore-button").disabled = true;
  wakeOperations();
}

// ---- SQL ----

function renderResult(reply) {
  const parts = reply.statements.map((statement) => statement.columns.length
    ? el("table", { class: "result" },
      el("thead", {}, el("tr", {}, ...statement.columns.map((c) => el("th", { text: c })))),
      el("tbody", {}, ...statement.rows.map((row) => el("tr", {},
        ...row.map((v) => el("td", { text: v === null ? "NULL" : v }))))))
    : el("p", { text: `OK, ${statement.row_count} row${statement.row_count === 1 ? "" : "s"}.` }));
  if (reply.truncated) parts.push(el("p", { class: "help", text: "More rows than shown." }));
  if (reply.error) parts.push(el("p", { class: "error", role: "alert", text: `${reply.error.message} (${reply.error.sqlstate})` }));
  $("sql-result").replaceChildren(...parts);
}

// ---- operations, live ----

function wakeOperations() {
  if (state.wake) state.wake();
}

function idle(ms) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    state.wake = () => { clearTimeout(timer); resolve(); };
  });
}

function renderOperations() {
  $("operation-list").replaceChildren(...state.operations.slice(0, 30).map((op) => {
    const branch = state.branches.find((b) => b.id === op.branch_id);
    return el("li", { class: op.status, "data-id": op.id, "data-status": op.status },
      el("strong", { text: op.action.replace(/_/g, " ") }), " ",
      el("span", { text: op.status }), el("br"),
      el("small", { text: `${branch ? branch.name + " · " : ""}${when(op.created_at)}${op.error ? " · " + op.error : ""}` }));
  }));
}

// One loop per project: lists its operations, long-polls a running one until it ends (then refreshes what it
// changed), and otherwise looks again every few seconds or when an action wakes it.
async function watchOperations() {
  const generation = ++state.watch;
  const project = state.project;
  // Each operation's status at the last look: one that ended between two looks (a restore can take a few
  // milliseconds, too fast to be seen running) still has what it changed shown.
  const seen = new Map();
  let first = true;
  while (generation === state.watch) {
    try {
      state.operations = await listAll(`/v1/projects/${project.id}/operations`, "operations");
      renderOperations();
      const endedUnseen = state.operations.some((op) => op.status !== "running" && seen.get(op.id) !== op.status);
      for (const op of state.operations) seen.set(op.id, op.status);
      if (endedUnseen && !first && generation === state.watch) {
        await loadDatabases();
        if (state.database) await refreshDatabase();
      }
      first = false;
      const running = state.operations.find((op) => op.status === "running");
      if (running) {
        const ended = (await api("GET", `/v1/operations/${running.id}?wait=${LONG_POLL}`)).operation;
        seen.set(ended.id, ended.status);
        if (ended.status !== "running" && generation === state.watch) {
          say(`${ended.action.replace(/_/g, " ")} ${ended.status}${ended.error ? ": " + ended.error : ""}.`);
          await loadDatabases();
          if (state.database) await refreshDatabase();
        }
      } else {
        await idle(IDLE_POLL_MS);
      }
    } catch (error) {
      fail(error);
      await idle(IDLE_POLL_MS);
    }
  }
}

// ---- wiring ----

function wire() {
  $("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("signin-error").textContent = "";
    try { await signIn($("api-key").value.trim()); } catch (error) {
      state.key = null;
      $("signin-error").textContent = error instanceof ApiError ? error.toString() : String(error);
    }
  });
  $("sign-out").addEventListener("click", signOut);
  $("project-form").addEventListener("submit", action(async () => {
    const reply = await api("POST", "/v1/projects", { name: $("new-project-name").value });
    $("new-project-name").value = "";
    await selectProject(reply.project);
    say(`Project ${reply.project.name} created.`);
  }));
  $("database-form").addEventListener("submit", action(async () => {
    const name = $("new-database-name").value;
    $("new-database-name").value = "";
    await createDatabase(name);
  }));
  $("password-form").addEventListener("submit", action(async () => {
    const all = passwords();
    all[state.database.id] = $("database-password").value;
    sessionStorage.setItem(PASSWORDS_ITEM, JSON.stringify(all));
    say("Password kept for this tab.");
  }));
  const databaseAction = (suffix, verb) => action(async () => {
    const reply = await api("POST", `/v1/databases/${state.database.id}/${suffix}`);
    if (suffix === "reset_password") {
      rememberPassword(reply.database.id, reply.database.connection_uri);
      $("secret-uri").textContent = reply.database.connection_uri;
      $("secret-dialog").showModal();
    }
    await loadDatabases();
    await refreshDatabase();
    say(`Database ${reply.database.name} ${verb}.`);
  });
  $("database-resume").addEventListener("click", databaseAction("resume", "resumed"));
  $("database-suspend").addEventListener("click", databaseAction("suspend", "suspended"));
  $("database-reset-password").addEventListener("click", databaseAction("reset_password", "has a new password"));
  $("database-delete").addEventListener("click", action(async () => {
    const database = state.database;
    if (!(await confirmDialog(`Delete database ${database.name} with all its branches and data? This cannot be undone.`))) return;
    await api("DELETE", `/v1/databases/${database.id}`);
    state.database = null;
    $("database-panel").hidden = true;
    await loadDatabases();
    say(`Database ${database.name} deleted.`);
  }));
  $("rename-form").addEventListener("submit", action(async () => {
    const reply = await api("PATCH", `/v1/branches/${state.branch.id}`, { name: $("branch-new-name").value });
    $("branch-new-name").value = "";
    state.branch = reply.branch;
    await loadBranches();
    say(`Branch renamed to ${reply.branch.name}.`);
  }));
  $("branch-promote").addEventListener("click", action(async () => {
    const reply = await api("PATCH", `/v1/branches/${state.branch.id}`, { is_default: true });
    state.branch = reply.branch;
    await refreshDatabase();
    say(`${reply.branch.name} is now the default branch.`);
  }));
  $("branch-delete").addEventListener("click", action(async () => {
    const branch = state.branch;
    if (!(await confirmDialog(`Delete branch ${branch.name} and every branch forked from it?`))) return;
    await api("DELETE", `/v1/branches/${branch.id}`);
    state.branch = null;
    await loadBranches();
    say(`Branch ${branch.name} deleted.`);
  }));
  $("branch-protect").addEventListener("click", action(() => updateBranch({ protected: !state.branch.protected },
    (b) => `${b.name} is ${b.protected ? "protected" : "no longer protected"}.`)));
  $("branch-reset").addEventListener("click", action(resetBranch));
  $("expiry-form").addEventListener("submit", action(() => {
    if (!$("branch-expires-at").value) throw new Error("pick a time, or Never expire");
    return updateBranch({ expires_at: utc($("branch-expires-at").value) }, (b) => `${b.name} expires ${when(b.expires_at)}.`);
  }));
  $("branch-expiry-clear").addEventListener("click", action(() =>
    updateBranch({ expires_at: null }, (b) => `${b.name} no longer expires.`)));
  $("labels-form").addEventListener("submit", action(() => updateBranch({ labels: parseLabels($("branch-labels-input").value) },
    (b) => `${b.name}'s labels: ${labelText(b.labels) || "(none)"}.`)));
  $("diff-button").addEventListener("click", action(schemaDiff));
  $("child-form").addEventListener("submit", action(async () => {
    const body = { name: $("child-name").value, parent_branch_id: state.branch.id };
    if ($("child-at").value) body.parent_timestamp = utc($("child-at").value);
    const reply = await api("POST", `/v1/databases/${state.database.id}/branches`, body);
    $("child-name").value = "";
    $("child-at").value = "";
    await loadBranches();
    selectBranch(state.branches.find((b) => b.id === reply.branch.id) || reply.branch);
    say(`Branch ${reply.branch.name} created.`);
  }));
  $("restore-time").addEventListener("input", () => { $("restore-button").disabled = true; });
  $("restore-preview-button").addEventListener("click", action(preview));
  $("restore-button").addEventListener("click", action(restore));
  $("sql-form").addEventListener("submit", action(async () => {
    $("sql-result").replaceChildren(el("p", { class: "help", text: "Running…" }));
    const at = $("sql-at").value ? utc($("sql-at").value) : null;
    renderResult(await sql($("sql-branch").value, at, $("sql-query").value));
  }));
  for (const button of document.querySelectorAll("button.copy")) {
    button.addEventListener("click", action(async () => {
      await navigator.clipboard.writeText($(button.dataset.copy).textContent);
      say("Copied.");
    }));
  }
}

wire();
window.addEventListener("resize", () => { if (state.database) drawTree(); });
if (state.key) {
  signIn(state.key).catch(() => { sessionStorage.removeItem(KEY_ITEM); state.key = null; });
}
