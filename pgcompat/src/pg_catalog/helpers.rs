//! The untyped views the catalog views are built from, and the views the translator's lookups read.

/// Views the catalog views are built from (untyped, internal).
pub(super) const HELPERS: &[(&str, &str)] = &[
    (
        "rel",
        // `nsp`, `relname`, `nspoid`: the schema and own name a SQLite name stands for (see `crate::schemas`).
        "SELECT s.rowid AS rid, 16384 + s.rowid * 64 AS oid, s.name AS name, \
         CASE WHEN s.type = 'view' AND EXISTS (SELECT 1 FROM _pgc_seqdefs q WHERE q.name = s.name) THEN 'sequence' \
         ELSE s.type END AS type, s.tbl_name AS tbl, s.sql AS sql, coalesce(n.name, 'public') AS nsp, \
         CASE WHEN n.name IS NULL THEN s.name ELSE substr(s.name, length(n.name) + 2) END AS relname, \
         coalesce(1593835520 + n.id, 2200) AS nspoid \
         FROM main.sqlite_schema s LEFT JOIN _pgc_nspdefs n ON n.name = substr(s.name, 1, max(instr(s.name, '.') - 1, 0)) \
         WHERE s.type IN ('table', 'view', 'index') AND s.sql IS NOT NULL \
         AND s.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND s.name NOT LIKE '\\_cambium\\_%' ESCAPE '\\'",
    ),
    (
        "cols",
        "SELECT r.rid AS rid, r.oid AS relid, r.name AS relname, r.nsp AS nsp, r.relname AS bare, r.nspoid AS nspoid, \
         r.type AS reltype, p.cid + 1 AS attnum, p.name AS attname, \
         p.type AS decl, p.\"notnull\" AS nn, p.dflt_value AS dflt, p.pk AS pk, ct.type AS pgtype, \
         coalesce(p.name = _pgc_serial(r.name, r.sql), 0) AS serial, _pgc_type_oid(ct.type, p.type) AS typid, _pgc_typmod(ct.type) AS typmod, \
         coalesce((SELECT q.identity FROM _pgc_seqdefs q WHERE q.owner_table = r.name COLLATE NOCASE \
         AND q.owner_column = p.name COLLATE NOCASE AND q.identity <> ''), \
         CASE WHEN p.name = _pgc_serial(r.name, r.sql) THEN _pgc_identity(r.sql) ELSE '' END) AS identity, \
         p.hidden IN (2, 3) AS gen, CASE WHEN p.hidden IN (2, 3) THEN _pgc_generated(r.sql, p.name) END AS genexpr \
         FROM _pgc_rel r JOIN pragma_table_xinfo(r.name, 'main') p \
         LEFT JOIN _pgc_coltypes ct ON ct.table_name = lower(r.name) AND ct.column_name = p.name COLLATE NOCASE \
         WHERE r.type IN ('table', 'view') AND p.hidden <> 1",
    ),
    (
        // Every sequence: the ones kept in `_cambium_sequences` (with their views' OIDs), and the implicit
        // ones of serial keys made before sequences were kept (SQLite AUTOINCREMENT columns).
        "seq",
        "SELECT r.oid AS oid, r.name AS seqname, CASE q.type WHEN 'int2' THEN 21 WHEN 'int4' THEN 23 ELSE 20 END AS typid, \
         q.start_value AS start, q.increment_by AS inc, q.min_value AS minv, q.max_value AS maxv, q.cache_size AS cache, \
         q.cycle AS cycle, q.last_value AS last_value, q.is_called AS is_called, t.name AS tbl, \
         (SELECT c.attname FROM _pgc_cols c WHERE c.rid = t.rid AND c.attname = q.owner_column COLLATE NOCASE) AS col, \
         t.oid AS relid, t.rid AS relrid, \
         (SELECT c.attnum FROM _pgc_cols c WHERE c.rid = t.rid AND c.attname = q.owner_column COLLATE NOCASE) AS attnum, \
         q.identity AS identity, r.nsp AS nsp, r.relname AS bare, r.nspoid AS nspoid \
         FROM _pgc_seqdefs q JOIN _pgc_rel r ON r.name = q.name AND r.type = 'sequence' \
         LEFT JOIN _pgc_rel t ON t.name = q.owner_table COLLATE NOCASE AND t.type = 'table' \
         UNION ALL SELECT relid + 1, relname || '_' || attname || '_seq', typid, 1, 1, 1, \
         CASE typid WHEN 21 THEN 32767 WHEN 23 THEN 2147483647 ELSE 9223372036854775807 END, 1, 0, NULL, 0, \
         relname, attname, relid, rid, attnum, identity, nsp, bare || '_' || attname || '_seq', nspoid \
         FROM _pgc_cols WHERE serial",
    ),
    (
        // The deferrable UNIQUE constraints (`crate::deferrable`): their indexes, by their triggers' names.
        "dfr",
        "SELECT i.name AS name, i.tbl_name AS tbl, substr(t.name, 17, 1) = 'd' AS deferred \
         FROM main.sqlite_schema t JOIN main.sqlite_schema i ON i.type = 'index' AND i.name = substr(t.name, 23) \
         WHERE t.type = 'trigger' AND t.name LIKE '\\_cambium\\_unique\\__\\_ins:%' ESCAPE '\\'",
    ),
    (
        "cons0",
        "SELECT r.rid AS rid, r.oid AS conrelid, r.name AS relname, r.nsp AS nsp, r.relname AS bare, \
         r.nspoid AS nspoid, CAST(j.key AS INTEGER) AS ord, \
         r.oid + 32 + j.key AS oid, r.oid + 2 + j.key AS idxoid, \
         json_extract(j.value, '$.name') AS conname, json_extract(j.value, '$.type') AS contype, \
         json_extract(j.value, '$.cols') AS cols, json_extract(j.value, '$.ref_table') AS reftable, \
         json_extract(j.value, '$.ref_cols') AS refcols0, json_extract(j.value, '$.upd') AS upd, \
         json_extract(j.value, '$.del') AS del, json_extract(j.value, '$.def') AS def0, \
         coalesce(json_extract(j.value, '$.dfr'), 0) AS dfr, coalesce(json_extract(j.value, '$.dfd'), 0) AS dfd, \
         0 AS own_index \
         FROM _pgc_rel r, json_each(_pgc_constraints(r.relname, r.sql)) j WHERE r.type = 'table' \
         UNION ALL SELECT r.rid, r.oid, r.name, r.nsp, r.relname, r.nspoid, 1000 + i.rid, i.oid + 30, i.oid, i.relname, 'u', \
         (SELECT json_group_array(p.name ORDER BY p.seqno) FROM pragma_index_info(i.name, 'main') p), NULL, NULL, NULL, NULL, \
         'UNIQUE (' || (SELECT group_concat(_pgc_ident(p.name), ', ' ORDER BY p.seqno) FROM pragma_index_info(i.name, 'main') p) \
         || ') DEFERRABLE' || CASE WHEN d.deferred THEN ' INITIALLY DEFERRED' ELSE '' END, 1, d.deferred, 1 \
         FROM _pgc_dfr d JOIN _pgc_rel i ON i.name = d.name AND i.type = 'index' \
         JOIN _pgc_rel r ON r.name = d.tbl AND r.type = 'table'",
    ),
    (
        "cons",
        "SELECT k.*, CASE WHEN k.contype <> 'f' THEN NULL WHEN json_array_length(k.refcols0) > 0 THEN k.refcols0 \
         ELSE (SELECT json_group_array(name) FROM (SELECT p.name FROM pragma_table_info(k.reftable, 'main') p WHERE p.pk > 0 ORDER BY p.pk)) END AS refcols, \
         (SELECT t.oid FROM _pgc_rel t WHERE t.type = 'table' AND t.name = k.reftable COLLATE NOCASE) AS refoid, \
         (SELECT t.rid FROM _pgc_rel t WHERE t.type = 'table' AND t.name = k.reftable COLLATE NOCASE) AS refrid \
         FROM _pgc_cons0 k",
    ),
    (
        "idx",
        "SELECT k.idxoid AS oid, k.conname AS name, k.conrelid AS relid, k.rid AS rid, k.relname AS tbl, 1 AS isunique, \
         k.contype = 'p' AS isprimary, k.cols AS cols, 1 AS iscon, k.nsp AS nsp, k.conname AS bare, k.bare AS tblbare, \
         k.nspoid AS nspoid, NULL AS sql, 0 AS dfr FROM _pgc_cons k WHERE k.contype IN ('p', 'u') AND NOT k.own_index \
         UNION ALL SELECT r.oid, r.name, t.oid, t.rid, t.name, \
         coalesce((SELECT l.\"unique\" FROM pragma_index_list(t.name, 'main') l WHERE l.name = r.name), 0) \
         OR EXISTS (SELECT 1 FROM _pgc_dfr d WHERE d.name = r.name), 0, \
         (SELECT json_group_array(name) FROM (SELECT i.name AS name FROM pragma_index_info(r.name, 'main') i ORDER BY i.seqno)), \
         EXISTS (SELECT 1 FROM _pgc_dfr d WHERE d.name = r.name), \
         t.nsp, CASE WHEN r.nsp = t.nsp THEN r.relname ELSE r.name END, t.relname, t.nspoid, r.sql, \
         EXISTS (SELECT 1 FROM _pgc_dfr d WHERE d.name = r.name) \
         FROM _pgc_rel r JOIN _pgc_rel t ON t.name = r.tbl AND t.type = 'table' WHERE r.type = 'index'",
    ),
    (
        "idx2",
        "SELECT x.*, 'CREATE ' || CASE WHEN x.isunique THEN 'UNIQUE ' ELSE '' END || 'INDEX ' || _pgc_ident(x.bare) || \
         ' ON ' || _pgc_ident(x.nsp) || '.' || _pgc_ident(x.tblbare) || ' USING btree (' || \
         coalesce(_pgc_index_keys(x.sql), (SELECT group_concat(_pgc_ident(e.value), ', ') FROM json_each(x.cols) e) || ')') AS indexdef, \
         (SELECT group_concat(coalesce(c.attnum, 0), ' ' ORDER BY e.key) FROM json_each(x.cols) e LEFT JOIN _pgc_cols c ON c.rid = x.rid AND c.attname = e.value COLLATE NOCASE) AS indkey, \
         (SELECT group_concat(_pgc_key_opclass(c.typid), ' ' ORDER BY e.key) FROM json_each(x.cols) e LEFT JOIN _pgc_cols c ON c.rid = x.rid AND c.attname = e.value COLLATE NOCASE) AS indclass, \
         (SELECT group_concat(CASE WHEN c.typid IN (25, 1042, 1043) THEN 100 WHEN c.typid = 19 THEN 950 ELSE 0 END, ' ' ORDER BY e.key) FROM json_each(x.cols) e LEFT JOIN _pgc_cols c ON c.rid = x.rid AND c.attname = e.value COLLATE NOCASE) AS indcollation, \
         coalesce((SELECT group_concat(CASE WHEN xi.\"desc\" THEN 3 ELSE 0 END, ' ' ORDER BY xi.seqno) FROM pragma_index_xinfo(x.name, 'main') xi WHERE xi.key), \
         (SELECT group_concat('0', ' ') FROM json_each(x.cols))) AS indoption \
         FROM _pgc_idx x",
    ),
];

/// Views the translator's lookups read (`::regclass`, `pg_get_indexdef`…). Their columns have names no
/// other relation has, so a lookup subquery never captures a column of the query around it
/// (`pg_get_constraintdef(oid)` must read the outer `oid`).
pub(super) const LOOKUPS: &[(&str, &str)] = &[
    (
        "relnames",
        // `_pgc_visible`: the relation is the one its bare name reaches through the `search_path`.
        "SELECT c.oid AS _pgc_oid, c.relname AS _pgc_name, n.nspname AS _pgc_nsp, _pgc_path_pos(n.nspname) AS _pgc_pos, \
         (_pgc_path_pos(n.nspname) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM _pgc_pg_class o \
         JOIN _pgc_pg_namespace m ON m.oid = o.relnamespace WHERE o.relname = c.relname \
         AND _pgc_path_pos(m.nspname) < _pgc_path_pos(n.nspname))) AS _pgc_visible \
         FROM _pgc_pg_class c JOIN _pgc_pg_namespace n ON n.oid = c.relnamespace",
    ),
    (
        "relshown",
        "SELECT _pgc_oid, CASE WHEN _pgc_visible THEN _pgc_ident(_pgc_name) \
         ELSE _pgc_ident(_pgc_nsp) || '.' || _pgc_ident(_pgc_name) END AS _pgc_shown FROM _pgc_relnames",
    ),
    (
        "nspnames",
        "SELECT oid AS _pgc_oid, nspname AS _pgc_name FROM _pgc_pg_namespace",
    ),
    (
        "descs",
        "SELECT objoid AS _pgc_oid, classoid AS _pgc_class, objsubid AS _pgc_sub, description AS _pgc_desc \
         FROM _pgc_pg_description",
    ),
    (
        "indexdefs",
        // `_pgc_keys`: the key columns' names (a JSON array, null for an expression key); `_pgc_sql` the
        // `CREATE INDEX` text of an index made by one (not a constraint's).
        "SELECT oid AS _pgc_oid, indexdef AS _pgc_def, cols AS _pgc_keys, sql AS _pgc_sql FROM _pgc_idx2",
    ),
    (
        "condefs",
        "SELECT k.oid AS _pgc_oid, CASE WHEN k.contype = 'f' THEN replace(replace(k.def0, '{REFCOLS}', \
         coalesce((SELECT group_concat(_pgc_ident(e.value), ', ') FROM json_each(k.refcols) e), '')), \
         '{REFTABLE}', _pgc_shown_rel(k.reftable)) ELSE k.def0 END AS _pgc_def \
         FROM _pgc_cons k",
    ),
    (
        "viewdefs",
        "SELECT r.oid AS _pgc_oid, r.relname AS _pgc_name, r.sql AS _pgc_sql FROM _pgc_rel r WHERE r.type = 'view'",
    ),
    (
        // Every relation's columns in order with their recorded types, one JSON object (`_pgc_viewdef`'s).
        "viewcols",
        "SELECT json_group_object(name, json(cols)) AS _pgc_json FROM (SELECT lower(c.relname) AS name, \
         json_group_array(json_array(c.attname, c.pgtype) ORDER BY c.attnum) AS cols FROM _pgc_cols c GROUP BY c.rid)",
    ),
    (
        "seqnames",
        "SELECT tbl AS _pgc_tbl, relid AS _pgc_tbloid, col AS _pgc_col, seqname AS _pgc_name, nsp AS _pgc_nsp, \
         bare AS _pgc_bare \
         FROM _pgc_seq WHERE tbl IS NOT NULL",
    ),
    (
        // `pg_get_function_result`/`_arguments` of every function of `pg_proc`.
        "fnlookups",
        "SELECT p.oid AS _pgc_oid, format_type(p.prorettype, NULL) AS _pgc_result, \
         coalesce((SELECT _pgc_fn_info(f.args, 'identity') FROM _pgc_fndefs f WHERE 1577058304 + f.id = p.oid), '') \
         AS _pgc_args FROM _pgc_pg_proc p",
    ),
    (
        "typnames",
        "SELECT oid AS _pgc_oid, typname AS _pgc_name FROM _pgc_pg_type",
    ),
];
