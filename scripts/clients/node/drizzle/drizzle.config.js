// drizzle-kit's configuration for the clients checks: the schema beside it, migrations generated into out/ (in
// the temporary copy the checks run from), the database drizzle_check.mjs passes.
import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./drizzle/schema.js",
  out: "./drizzle/out",
  dbCredentials: { url: process.env.CLIENTS_DRIZZLE_URI },
  strict: false,
  verbose: true,
});
