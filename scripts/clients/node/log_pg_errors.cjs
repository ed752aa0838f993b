// Preloaded (node --require) into drizzle-kit, which reports a failed query only by its exit code: writes the SQL
// and the server's error of every failed query of the `pg` driver to stderr, where the check's log keeps them,
// prefixed `pg query failed:` so that drizzle_check.mjs can quote the first one.
const pg = require("pg");

function report(text, error) {
  const sql = String(text).replace(/\s+/g, " ").slice(0, 300);
  process.stderr.write(`pg query failed: ${error.code ? `[${error.code}] ` : ""}${error.message} -- SQL: ${sql}\n`);
}

const query = pg.Client.prototype.query;
pg.Client.prototype.query = function loggedQuery(config, values, callback) {
  const text = typeof config === "string" ? config : config && config.text;
  const wrap = (cb) =>
    function loggedCallback(error, ...rest) {
      if (error) report(text, error);
      return cb(error, ...rest);
    };
  if (typeof values === "function") {
    return query.call(this, config, wrap(values));
  }
  if (typeof callback === "function") {
    return query.call(this, config, values, wrap(callback));
  }
  if (config && typeof config.callback === "function") {
    config.callback = wrap(config.callback);
    return query.call(this, config, values);
  }
  const result = query.call(this, config, values);
  if (result && typeof result.then === "function") {
    result.then(undefined, (error) => report(text, error));
  }
  return result;
};
