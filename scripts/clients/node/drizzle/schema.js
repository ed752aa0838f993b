// The drizzle schema of the clients checks: serial keys, a foreign key, an index, a unique constraint, defaults,
// and the common column types. drizzle-kit push creates it; drizzle_check.mjs runs CRUD on it.
import { relations } from "drizzle-orm";
import {
  boolean,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  serial,
  text,
  timestamp,
  uniqueIndex,
  varchar,
} from "drizzle-orm/pg-core";

export const users = pgTable(
  "dz_users",
  {
    id: serial("id").primaryKey(),
    email: varchar("email", { length: 200 }).notNull(),
    name: text("name"),
    admin: boolean("admin").notNull().default(false),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex("dz_users_email_key").on(t.email)],
);

export const posts = pgTable(
  "dz_posts",
  {
    id: serial("id").primaryKey(),
    authorId: integer("author_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    title: text("title").notNull(),
    score: numeric("score", { precision: 8, scale: 2 }),
    tags: jsonb("tags").$type().default([]),
  },
  (t) => [index("dz_posts_author_idx").on(t.authorId)],
);

export const usersRelations = relations(users, ({ many }) => ({ posts: many(posts) }));
export const postsRelations = relations(posts, ({ one }) => ({
  author: one(users, { fields: [posts.authorId], references: [users.id] }),
}));
