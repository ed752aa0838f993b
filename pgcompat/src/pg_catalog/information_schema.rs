//! The `information_schema` views, computed from the `pg_catalog` views and the helper views.

use super::View;

/// The `information_schema` views (named `is_*`).
pub(super) const INFORMATION_SCHEMA_VIEWS: &[View] = &[
    View {
        name: "is_schemata",
        columns: "catalog_name:name, schema_name:name, schema_owner:name, default_character_set_catalog:name, \
                  default_character_set_schema:name, default_character_set_name:name, sql_path:text",
        select: "SELECT pg_current_database(), n.nspname, pg_get_userbyid(n.nspowner), NULL, NULL, NULL, NULL FROM _pgc_pg_namespace n",
    },
    View {
        name: "is_tables",
        columns: "table_catalog:name, table_schema:name, table_name:name, table_type:text, \
                  self_referencing_column_name:name, reference_generation:text, user_defined_type_catalog:name, \
                  user_defined_type_schema:name, user_defined_type_name:name, is_insertable_into:text, is_typed:text, \
                  commit_action:text",
        select: "SELECT pg_current_database(), r.nsp, r.relname, CASE r.type WHEN 'table' THEN 'BASE TABLE' ELSE 'VIEW' END, \
                 NULL, NULL, NULL, NULL, NULL, CASE r.type WHEN 'table' THEN 'YES' ELSE 'NO' END, 'NO', NULL \
                 FROM _pgc_rel r WHERE r.type IN ('table', 'view')",
    },
    View {
        name: "is_columns",
        columns: "table_catalog:name, table_schema:name, table_name:name, column_name:name, ordinal_position:int4, \
                  column_default:text, is_nullable:text, data_type:text, character_maximum_length:int4, \
                  character_octet_length:int4, numeric_precision:int4, numeric_precision_radix:int4, \
                  numeric_scale:int4, datetime_precision:int4, interval_type:text, interval_precision:int4, \
                  udt_catalog:name, udt_schema:name, udt_name:name, is_identity:text, identity_generation:text, \
                  identity_start:text, identity_increment:text, identity_maximum:text, identity_minimum:text, \
                  identity_cycle:text, is_generated:text, generation_expression:text, is_updatable:text",
        select: "SELECT pg_current_database(), c.nsp, c.bare, c.attname, c.attnum, \
                 CASE WHEN NOT c.gen THEN (SELECT d.adbin FROM _pgc_pg_attrdef d WHERE d.adrelid = c.relid AND d.adnum = c.attnum) END, \
                 CASE WHEN c.nn OR c.pk > 0 THEN 'NO' ELSE 'YES' END, _pgc_column_info(c.typid, c.typmod, 'data_type'), \
                 _pgc_column_info(c.typid, c.typmod, 'character_maximum_length'), \
                 _pgc_column_info(c.typid, c.typmod, 'character_octet_length'), \
                 _pgc_column_info(c.typid, c.typmod, 'numeric_precision'), \
                 _pgc_column_info(c.typid, c.typmod, 'numeric_precision_radix'), \
                 _pgc_column_info(c.typid, c.typmod, 'numeric_scale'), \
                 _pgc_column_info(c.typid, c.typmod, 'datetime_precision'), NULL, NULL, \
                 pg_current_database(), CASE WHEN c.typid >= 1610612736 THEN 'public' ELSE 'pg_catalog' END, \
                 (SELECT t.typname FROM _pgc_types t WHERE t.oid = c.typid), \
                 CASE WHEN c.identity = '' THEN 'NO' ELSE 'YES' END, \
                 CASE c.identity WHEN 'a' THEN 'ALWAYS' WHEN 'd' THEN 'BY DEFAULT' END, \
                 CAST(s.start AS TEXT), CAST(s.inc AS TEXT), CAST(s.maxv AS TEXT), CAST(s.minv AS TEXT), \
                 CASE WHEN s.cycle THEN 'YES' ELSE 'NO' END, CASE WHEN c.gen THEN 'ALWAYS' ELSE 'NEVER' END, c.genexpr, \
                 CASE c.reltype WHEN 'table' THEN 'YES' ELSE 'NO' END FROM _pgc_cols c \
                 LEFT JOIN _pgc_seq s ON c.identity <> '' AND s.relid = c.relid AND s.attnum = c.attnum",
    },
    View {
        name: "is_views",
        columns: "table_catalog:name, table_schema:name, table_name:name, view_definition:text, check_option:text, \
                  is_updatable:text, is_insertable_into:text, is_trigger_updatable:text, is_trigger_deletable:text, \
                  is_trigger_insertable_into:text",
        select: "SELECT pg_current_database(), r.nsp, r.relname, _pgc_viewdef(r.sql, 0, (SELECT _pgc_json FROM _pgc_viewcols)), 'NONE', 'NO', 'NO', 'NO', 'NO', 'NO' \
                 FROM _pgc_rel r WHERE r.type = 'view'",
    },
    View {
        name: "is_table_constraints",
        columns: "constraint_catalog:name, constraint_schema:name, constraint_name:name, table_catalog:name, \
                  table_schema:name, table_name:name, constraint_type:text, is_deferrable:text, \
                  initially_deferred:text, enforced:text, nulls_distinct:text",
        select: "SELECT pg_current_database(), k.nsp, k.conname, pg_current_database(), k.nsp, k.bare, \
                 CASE k.contype WHEN 'p' THEN 'PRIMARY KEY' WHEN 'u' THEN 'UNIQUE' WHEN 'f' THEN 'FOREIGN KEY' ELSE 'CHECK' END, \
                 CASE WHEN k.dfr THEN 'YES' ELSE 'NO' END, CASE WHEN k.dfd THEN 'YES' ELSE 'NO' END, 'YES', \
                 CASE WHEN k.contype = 'u' THEN 'YES' END FROM _pgc_cons k",
    },
    View {
        name: "is_key_column_usage",
        columns: "constraint_catalog:name, constraint_schema:name, constraint_name:name, table_catalog:name, \
                  table_schema:name, table_name:name, column_name:name, ordinal_position:int4, \
                  position_in_unique_constraint:int4",
        select: "SELECT pg_current_database(), k.nsp, k.conname, pg_current_database(), k.nsp, k.bare, e.value, \
                 e.key + 1, CASE WHEN k.contype = 'f' THEN e.key + 1 END FROM _pgc_cons k, json_each(k.cols) e \
                 WHERE k.contype IN ('p', 'u', 'f')",
    },
    View {
        name: "is_referential_constraints",
        columns: "constraint_catalog:name, constraint_schema:name, constraint_name:name, \
                  unique_constraint_catalog:name, unique_constraint_schema:name, unique_constraint_name:name, \
                  match_option:text, update_rule:text, delete_rule:text",
        select: "SELECT pg_current_database(), k.nsp, k.conname, pg_current_database(), \
                 (SELECT t.nsp FROM _pgc_rel t WHERE t.rid = k.refrid), (SELECT u.conname FROM _pgc_cons u WHERE u.rid = k.refrid AND u.contype IN ('p', 'u') AND u.cols = k.refcols), \
                 'NONE', _pgc_rule(k.upd), _pgc_rule(k.del) FROM _pgc_cons k WHERE k.contype = 'f'",
    },
    View {
        name: "is_constraint_column_usage",
        columns: "table_catalog:name, table_schema:name, table_name:name, column_name:name, \
                  constraint_catalog:name, constraint_schema:name, constraint_name:name",
        select: "SELECT pg_current_database(), CASE WHEN k.contype = 'f' THEN \
                 (SELECT t.nsp FROM _pgc_rel t WHERE t.rid = k.refrid) ELSE k.nsp END, CASE WHEN k.contype = 'f' THEN \
                 (SELECT t.relname FROM _pgc_rel t WHERE t.rid = k.refrid) ELSE k.bare END, e.value, \
                 pg_current_database(), k.nsp, k.conname FROM _pgc_cons k, \
                 json_each(CASE WHEN k.contype = 'f' THEN k.refcols ELSE k.cols END) e",
    },
    View {
        name: "is_sequences",
        columns: "sequence_catalog:name, sequence_schema:name, sequence_name:name, data_type:text, \
                  numeric_precision:int4, numeric_precision_radix:int4, numeric_scale:int4, start_value:text, \
                  minimum_value:text, maximum_value:text, increment:text, cycle_option:text",
        select: "SELECT pg_current_database(), s.nsp, s.bare, format_type(s.typid, NULL), \
                 CASE s.typid WHEN 21 THEN 16 WHEN 23 THEN 32 ELSE 64 END, 2, 0, CAST(s.start AS TEXT), \
                 CAST(s.minv AS TEXT), CAST(s.maxv AS TEXT), CAST(s.inc AS TEXT), CASE WHEN s.cycle THEN 'YES' ELSE 'NO' END \
                 FROM _pgc_seq s WHERE s.identity = ''",
    },
    View {
        name: "is_routines",
        columns: "specific_catalog:name, specific_schema:name, specific_name:name, routine_catalog:name, \
                  routine_schema:name, routine_name:name, routine_type:text, data_type:text",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
];
