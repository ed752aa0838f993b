//! The `pg_catalog` views computed from the database's schema: relations, columns, types, indexes,
//! constraints, defaults, sequences and what depends on what.

use super::View;

/// The `pg_catalog` views over the database's own objects, in the order they are made (later ones read earlier ones).
pub(super) const RELATIONS: &[View] = &[
    View {
        name: "pg_namespace",
        columns: "oid:oid, nspname:name, nspowner:oid, nspacl:text",
        select: "VALUES (11, 'pg_catalog', 10, NULL), (99, 'pg_toast', 10, NULL), (2200, 'public', 6171, \
                 '{pg_database_owner=UC/pg_database_owner,=U/pg_database_owner}'), \
                 (13183, 'information_schema', 10, NULL) \
                 UNION ALL SELECT 1593835520 + n.id, n.name, 10, NULL FROM _pgc_nspdefs n",
    },
    View {
        name: "pg_class",
        columns: "oid:oid, relname:name, relnamespace:oid, reltype:oid, reloftype:oid, relowner:oid, relam:oid, \
                  relfilenode:oid, reltablespace:oid, relpages:int4, reltuples:float4, relallvisible:int4, \
                  reltoastrelid:oid, relhasindex:bool, relisshared:bool, relpersistence:char, relkind:char, \
                  relnatts:int2, relchecks:int2, relhasrules:bool, relhastriggers:bool, relhassubclass:bool, \
                  relrowsecurity:bool, relforcerowsecurity:bool, relispopulated:bool, relreplident:char, \
                  relispartition:bool, relrewrite:oid, relfrozenxid:int4, relminmxid:int4, relacl:text, \
                  reloptions:text[], relpartbound:text",
        select: "SELECT r.oid, r.relname, r.nspoid, 0, 0, 10, CASE r.type WHEN 'table' THEN 2 ELSE 0 END, \
                 CASE r.type WHEN 'table' THEN r.oid ELSE 0 END, 0, 0, -1, 0, 0, \
                 EXISTS (SELECT 1 FROM _pgc_idx x WHERE x.rid = r.rid), 0, 'p', CASE r.type WHEN 'table' THEN 'r' ELSE 'v' END, \
                 (SELECT count(*) FROM _pgc_cols c WHERE c.rid = r.rid), \
                 (SELECT count(*) FROM _pgc_cons k WHERE k.rid = r.rid AND k.contype = 'c'), r.type = 'view', \
                 EXISTS (SELECT 1 FROM _pgc_cons k WHERE k.contype = 'f' AND (k.rid = r.rid OR k.refrid = r.rid)), \
                 0, 0, 0, 1, CASE r.type WHEN 'table' THEN 'd' ELSE 'n' END, 0, 0, 0, 0, NULL, NULL, NULL \
                 FROM _pgc_rel r WHERE r.type IN ('table', 'view') \
                 UNION ALL SELECT x.oid, x.bare, x.nspoid, 0, 0, 10, 403, x.oid, 0, 1, 0, 0, 0, 0, 0, 'p', 'i', \
                 json_array_length(x.cols), 0, 0, 0, 0, 0, 0, 1, 'n', 0, 0, 0, 0, NULL, NULL, NULL FROM _pgc_idx x \
                 UNION ALL SELECT s.oid, s.bare, s.nspoid, 0, 0, 10, 0, s.oid, 0, 1, 1, 0, 0, 0, 0, 'p', 'S', \
                 3, 0, 0, 0, 0, 0, 0, 1, 'n', 0, 0, 0, 0, NULL, NULL, NULL FROM _pgc_seq s",
    },
    View {
        name: "pg_attribute",
        columns: "attrelid:oid, attname:name, atttypid:oid, attstattarget:int4, attlen:int2, attnum:int2, \
                  attndims:int4, attcacheoff:int4, atttypmod:int4, attbyval:bool, attalign:char, attstorage:char, \
                  attcompression:char, attnotnull:bool, atthasdef:bool, atthasmissing:bool, attidentity:char, \
                  attgenerated:char, attisdropped:bool, attislocal:bool, attinhcount:int4, attcollation:oid, \
                  attacl:text, attoptions:text[], attfdwoptions:text[], attmissingval:text",
        select: "SELECT c.relid, c.attname, c.typid, -1, coalesce(t.typlen, -1), c.attnum, t.typcategory = 'A', -1, c.typmod, \
                 coalesce(t.typbyval, 0), 'i', CASE WHEN coalesce(t.typlen, -1) = -1 THEN 'x' ELSE 'p' END, '', c.nn OR c.pk > 0, (c.dflt IS NOT NULL OR c.serial OR c.gen) AND c.identity = '', 0, c.identity, \
                 CASE WHEN c.gen THEN 's' ELSE '' END, 0, 1, 0, \
                 coalesce(t.typcollation, 0), NULL, NULL, NULL, NULL \
                 FROM _pgc_cols c LEFT JOIN _pgc_types t ON t.oid = c.typid \
                 UNION ALL SELECT r.oid, s.name, s.typid, 0, s.len, s.num, 0, -1, -1, s.len > 0, 'i', 'p', '', 1, 0, 0, '', '', 0, 1, 0, 0, \
                 NULL, NULL, NULL, NULL FROM _pgc_rel r, (SELECT 'tableoid' AS name, 26 AS typid, 4 AS len, -6 AS num UNION ALL SELECT 'cmax', 29, 4, -5 \
                 UNION ALL SELECT 'xmax', 28, 4, -4 UNION ALL SELECT 'cmin', 29, 4, -3 UNION ALL SELECT 'xmin', 28, 4, -2 \
                 UNION ALL SELECT 'ctid', 27, 6, -1) AS s \
                 WHERE r.type = 'table'",
    },
    View {
        name: "pg_type",
        columns: "oid:oid, typname:name, typnamespace:oid, typowner:oid, typlen:int2, typbyval:bool, typtype:char, \
                  typcategory:char, typispreferred:bool, typisdefined:bool, typdelim:char, typrelid:oid, \
                  typelem:oid, typarray:oid, typinput:text, typoutput:text, typbasetype:oid, typtypmod:int4, \
                  typndims:int4, typcollation:oid, typnotnull:bool, typdefault:text, typalign:char, typstorage:char, \
                  typacl:text[]",
        select: "SELECT t.oid, t.typname, t.typnamespace, 10, t.typlen, t.typbyval, t.typtype, t.typcategory, 0, 1, ',', 0, t.typelem, \
                 t.typarray, t.typinput, t.typoutput, 0, -1, 0, \
                 t.typcollation, 0, NULL, CASE WHEN t.typlen = 8 THEN 'd' WHEN t.typlen = 2 THEN 's' WHEN t.typlen = 1 THEN 'c' ELSE 'i' END, \
                 CASE WHEN t.typlen = -1 THEN 'x' ELSE 'p' END, NULL FROM _pgc_types t",
    },
    View {
        name: "pg_index",
        columns: "indexrelid:oid, indrelid:oid, indnatts:int2, indnkeyatts:int2, indisunique:bool, \
                  indnullsnotdistinct:bool, indisprimary:bool, indisexclusion:bool, indimmediate:bool, \
                  indisclustered:bool, indisvalid:bool, indcheckxmin:bool, indisready:bool, indislive:bool, \
                  indisreplident:bool, indkey:text, indcollation:text, indclass:text, indoption:text, \
                  indexprs:text, indpred:text",
        select: "SELECT x.oid, x.relid, json_array_length(x.cols), json_array_length(x.cols), x.isunique, 0, x.isprimary, \
                 0, NOT x.dfr, 0, 1, 0, 1, 1, 0, x.indkey, x.indcollation, x.indclass, x.indoption, NULL, NULL FROM _pgc_idx2 x",
    },
    View {
        name: "pg_constraint",
        columns: "oid:oid, conname:name, connamespace:oid, contype:char, condeferrable:bool, condeferred:bool, \
                  convalidated:bool, conrelid:oid, contypid:oid, conindid:oid, conparentid:oid, confrelid:oid, \
                  confupdtype:char, confdeltype:char, confmatchtype:char, conislocal:bool, coninhcount:int4, \
                  connoinherit:bool, conkey:int2[], confkey:int2[], conbin:text",
        select: "SELECT k.oid, k.conname, k.nspoid, k.contype, k.dfr, k.dfd, 1, k.conrelid, 0, \
                 CASE WHEN k.contype IN ('p', 'u') THEN k.idxoid WHEN k.contype = 'f' THEN coalesce((SELECT x.oid FROM _pgc_idx x \
                 WHERE x.rid = k.refrid AND x.cols = k.refcols), 0) ELSE 0 END, 0, coalesce(k.refoid, 0), k.upd, k.del, \
                 CASE WHEN k.contype = 'f' THEN 's' ELSE ' ' END, 1, 0, 0, \
                 (SELECT '{' || group_concat(c.attnum, ',') || '}' FROM json_each(k.cols) e JOIN _pgc_cols c ON c.rid = k.rid AND c.attname = e.value COLLATE NOCASE), \
                 (SELECT '{' || group_concat(c.attnum, ',') || '}' FROM json_each(k.refcols) e JOIN _pgc_cols c ON c.rid = k.refrid AND c.attname = e.value COLLATE NOCASE), \
                 NULL FROM _pgc_cons k",
    },
    View {
        name: "pg_attrdef",
        columns: "oid:oid, adrelid:oid, adnum:int2, adbin:text",
        select: "SELECT 1073741824 + c.rid * 2048 + c.attnum, c.relid, c.attnum, CASE WHEN c.gen THEN c.genexpr \
                 WHEN c.serial THEN \
                 'nextval(' || quote(_pgc_shown_rel(c.relname || '_' || c.attname || '_seq')) || '::regclass)' \
                 ELSE _pgc_default(c.dflt, c.pgtype) END FROM _pgc_cols c \
                 WHERE c.reltype = 'table' AND (c.dflt IS NOT NULL OR c.serial OR c.gen) AND c.identity = ''",
    },
    View {
        name: "pg_tables",
        columns: "schemaname:name, tablename:name, tableowner:name, tablespace:name, hasindexes:bool, \
                  hasrules:bool, hastriggers:bool, rowsecurity:bool",
        select: "SELECT n.nspname, c.relname, pg_current_user(), NULL, c.relhasindex, 0, c.relhastriggers, 0 \
                 FROM _pgc_pg_class c JOIN _pgc_pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r'",
    },
    View {
        name: "pg_indexes",
        columns: "schemaname:name, tablename:name, indexname:name, tablespace:name, indexdef:text",
        select: "SELECT x.nsp, x.tblbare, x.bare, NULL, x.indexdef FROM _pgc_idx2 x",
    },
    // Every index, with no statistics kept (SQLite counts no scans): drizzle-kit reads the names.
    View {
        name: "pg_stat_user_indexes",
        columns: "relid:oid, indexrelid:oid, schemaname:name, relname:name, indexrelname:name, idx_scan:int8, \
                  idx_tup_read:int8, idx_tup_fetch:int8",
        select: "SELECT x.relid, x.oid, x.nsp, x.tblbare, x.bare, 0, 0, 0 FROM _pgc_idx2 x",
    },
    View {
        name: "pg_stat_all_indexes",
        columns: "relid:oid, indexrelid:oid, schemaname:name, relname:name, indexrelname:name, idx_scan:int8, \
                  idx_tup_read:int8, idx_tup_fetch:int8",
        select: "SELECT x.relid, x.oid, x.nsp, x.tblbare, x.bare, 0, 0, 0 FROM _pgc_idx2 x",
    },
    View {
        name: "pg_views",
        columns: "schemaname:name, viewname:name, viewowner:name, definition:text",
        select: "SELECT r.nsp, r.relname, pg_current_user(), _pgc_viewdef(r.sql, 0, (SELECT _pgc_json FROM _pgc_viewcols)) \
                 FROM _pgc_rel r WHERE r.type = 'view'",
    },
    View {
        name: "pg_sequence",
        columns: "seqrelid:oid, seqtypid:oid, seqstart:int8, seqincrement:int8, seqmax:int8, seqmin:int8, \
                  seqcache:int8, seqcycle:bool",
        select: "SELECT s.oid, s.typid, s.start, s.inc, s.maxv, s.minv, s.cache, s.cycle FROM _pgc_seq s",
    },
    View {
        name: "pg_sequences",
        columns: "schemaname:name, sequencename:name, sequenceowner:name, data_type:regtype, start_value:int8, \
                  min_value:int8, max_value:int8, increment_by:int8, cycle:bool, cache_size:int8, last_value:int8",
        select: "SELECT s.nsp, s.bare, pg_current_user(), format_type(s.typid, NULL), s.start, s.minv, s.maxv, \
                 s.inc, s.cycle, s.cache, CASE WHEN s.is_called THEN s.last_value END FROM _pgc_seq s",
    },
    View {
        name: "pg_description",
        columns: "objoid:oid, classoid:oid, objsubid:int4, description:text",
        // `COMMENT ON` text (`translate::comment`) by the OID of what it describes.
        select: "SELECT r.oid, 1259, 0, d.comment FROM _pgc_descdefs d JOIN _pgc_rel r ON lower(r.name) = d.object \
                 WHERE d.kind = 'relation' \
                 UNION ALL SELECT c.relid, 1259, c.attnum, d.comment FROM _pgc_descdefs d JOIN _pgc_cols c \
                 ON lower(c.relname) = d.object AND c.attname = d.sub COLLATE NOCASE WHERE d.kind = 'column' \
                 UNION ALL SELECT n.oid, 2615, 0, d.comment FROM _pgc_descdefs d JOIN _pgc_pg_namespace n \
                 ON n.nspname = d.object WHERE d.kind = 'schema' \
                 UNION ALL SELECT 1610612736 + e.id * 1024, 1247, 0, d.comment FROM _pgc_descdefs d \
                 JOIN _pgc_enumdefs e ON e.name = d.object WHERE d.kind = 'type'",
    },
    View {
        name: "pg_depend",
        columns: "classid:oid, objid:oid, objsubid:int4, refclassid:oid, refobjid:oid, refobjsubid:int4, deptype:char",
        // Sequences on their columns, constraint indexes on their constraints, a view's `_RETURN` rule on
        // the view and on what it reads, a default on the sequence it reads (what pg_dump orders by).
        select: "SELECT 1259, s.oid, 0, 1259, s.relid, s.attnum, CASE WHEN s.identity = '' THEN 'a' ELSE 'i' END FROM _pgc_seq s WHERE s.relid IS NOT NULL \
                 UNION ALL SELECT 1259, x.oid, 0, 2606, x.oid + 30, 0, 'i' FROM _pgc_idx x WHERE x.iscon \
                 UNION ALL SELECT 2618, r.oid + 1, 0, 1259, r.oid, 0, 'i' FROM _pgc_rel r WHERE r.type = 'view' \
                 UNION ALL SELECT 2618, r.oid + 1, 0, 1259, r.oid, 0, 'n' FROM _pgc_rel r WHERE r.type = 'view' \
                 UNION ALL SELECT 2618, r.oid + 1, 0, 1259, t.oid, 0, 'n' FROM _pgc_rel r, json_each(_pgc_view_refs(r.sql)) j \
                 JOIN _pgc_rel t ON t.name = j.value COLLATE NOCASE AND t.type <> 'index' WHERE r.type = 'view' \
                 UNION ALL SELECT 2604, 1073741824 + c.rid * 2048 + c.attnum, 0, 1259, q.oid, 0, 'n' FROM _pgc_cols c \
                 JOIN _pgc_rel q ON q.type = 'sequence' AND q.name = _pgc_default_seq(c.dflt) COLLATE NOCASE \
                 WHERE c.reltype = 'table' AND c.dflt IS NOT NULL AND c.identity = ''",
    },
];
