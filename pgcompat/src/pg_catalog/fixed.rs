//! The `pg_catalog` views whose rows do not depend on the database: the access methods, the one role and
//! database, settings, languages, collations, and the catalogs of features Cambium does not have (empty, so
//! tools that read them see none).

use super::View;

/// The `pg_catalog` views with fixed rows (or none).
pub(super) const FIXED: &[View] = &[
    View {
        name: "pg_am",
        columns: "oid:oid, amname:name, amhandler:text, amtype:char",
        select: "VALUES (2, 'heap', 'heap_tableam_handler', 't'), (403, 'btree', 'bthandler', 'i'), \
                 (405, 'hash', 'hashhandler', 'i'), (783, 'gist', 'gisthandler', 'i'), (2742, 'gin', 'ginhandler', 'i'), \
                 (4000, 'spgist', 'spghandler', 'i'), (3580, 'brin', 'brinhandler', 'i')",
    },
    View {
        name: "pg_database",
        columns: "oid:oid, datname:name, datdba:oid, encoding:int4, datlocprovider:char, datistemplate:bool, \
                  datallowconn:bool, datconnlimit:int4, datfrozenxid:int4, datminmxid:int4, dattablespace:oid, \
                  datcollate:text, datctype:text, daticulocale:text, datcollversion:text, datacl:text[]",
        select: "SELECT 16384, pg_current_database(), 10, 6, 'c', 0, 1, -1, 0, 1, 1663, 'C.UTF-8', 'C.UTF-8', NULL, NULL, NULL",
    },
    View {
        name: "pg_roles",
        columns: "rolname:name, rolsuper:bool, rolinherit:bool, rolcreaterole:bool, rolcreatedb:bool, \
                  rolcanlogin:bool, rolreplication:bool, rolconnlimit:int4, rolpassword:text, rolvaliduntil:text, \
                  rolbypassrls:bool, rolconfig:text[], oid:oid",
        // The session's role, and PostgreSQL 15's `pg_database_owner` (6171), which owns the schema public.
        select: "SELECT pg_current_user(), 1, 1, 1, 1, 1, 1, -1, '********', NULL, 1, NULL, 10 \
                 UNION ALL SELECT 'pg_database_owner', 0, 1, 0, 0, 0, 0, -1, '********', NULL, 0, NULL, 6171",
    },
    View {
        name: "pg_authid",
        columns: "oid:oid, rolname:name, rolsuper:bool, rolinherit:bool, rolcreaterole:bool, rolcreatedb:bool, \
                  rolcanlogin:bool, rolreplication:bool, rolbypassrls:bool, rolconnlimit:int4, rolpassword:text, \
                  rolvaliduntil:text",
        select: "SELECT 10, pg_current_user(), 1, 1, 1, 1, 1, 1, 1, -1, NULL, NULL \
                 UNION ALL SELECT 6171, 'pg_database_owner', 0, 1, 0, 0, 0, 0, 0, -1, NULL, NULL",
    },
    View {
        name: "pg_user",
        columns: "usename:name, usesysid:oid, usecreatedb:bool, usesuper:bool, userepl:bool, usebypassrls:bool, \
                  passwd:text, valuntil:text, useconfig:text[]",
        select: "SELECT pg_current_user(), 10, 1, 1, 1, 1, '********', NULL, NULL",
    },
    View {
        name: "pg_auth_members",
        columns: "roleid:oid, member:oid, grantor:oid, admin_option:bool",
        select: "SELECT 0, 0, 0, 0 WHERE 0",
    },
    View {
        name: "pg_proc",
        columns: "oid:oid, proname:name, pronamespace:oid, proowner:oid, prolang:oid, procost:float4, prorows:float4, \
                  provariadic:oid, prosupport:oid, prokind:char, prosecdef:bool, proleakproof:bool, proisstrict:bool, \
                  proretset:bool, provolatile:char, proparallel:char, pronargs:int2, pronargdefaults:int2, \
                  prorettype:oid, proargtypes:text, proallargtypes:oid[], proargmodes:text[], proargnames:text[], \
                  proargdefaults:text, protrftypes:oid[], prosrc:text, probin:text, prosqlbody:text, proconfig:text[], \
                  proacl:text[]",
        // A few built-in functions tools look up by name, and the database's SQL functions (`routines`);
        // every column PostgreSQL 15 has (pg_dump, pgcli).
        select: "VALUES (1299, 'now', 11, 10, 12, 1, 0, 0, 0, 'f', 0, 0, 1, 0, 's', 's', 0, 0, 1184, '', NULL, NULL, NULL, NULL, NULL, 'now', NULL, NULL, NULL, NULL), \
                 (89, 'version', 11, 10, 12, 1, 0, 0, 0, 'f', 0, 0, 1, 0, 's', 's', 0, 0, 25, '', NULL, NULL, NULL, NULL, NULL, 'pgsql_version', NULL, NULL, NULL, NULL), \
                 (861, 'current_database', 11, 10, 12, 1, 0, 0, 0, 'f', 0, 0, 1, 0, 's', 's', 0, 0, 19, '', NULL, NULL, NULL, NULL, NULL, 'current_database', NULL, NULL, NULL, NULL), \
                 (1402, 'current_schema', 11, 10, 12, 1, 0, 0, 0, 'f', 0, 0, 1, 0, 's', 's', 0, 0, 19, '', NULL, NULL, NULL, NULL, NULL, 'current_schema', NULL, NULL, NULL, NULL) \
                 UNION ALL SELECT 1577058304 + f.id, CASE WHEN n.name IS NULL THEN f.name ELSE substr(f.name, length(n.name) + 2) END, \
                 coalesce(1593835520 + n.id, 2200), 10, 14, 100, 0, 0, 0, 'f', 0, 0, 0, 0, f.volatility, 'u', \
                 _pgc_fn_info(f.args, 'count'), 0, _pgc_type_oid(f.returns, ''), _pgc_fn_info(f.args, 'types'), NULL, NULL, \
                 _pgc_fn_info(f.args, 'names'), NULL, NULL, f.body, NULL, NULL, NULL, NULL \
                 FROM _pgc_fndefs f LEFT JOIN _pgc_nspdefs n ON n.name = substr(f.name, 1, max(instr(f.name, '.') - 1, 0))",
    },
    View {
        name: "pg_settings",
        columns: "name:text, setting:text, unit:text, category:text, short_desc:text, context:text, vartype:text, \
                  source:text, min_val:text, max_val:text, boot_val:text, reset_val:text",
        select: "SELECT s.value ->> 'name', s.value ->> 'setting', s.value ->> 'unit', s.value ->> 'category', \
                 s.value ->> 'short_desc', s.value ->> 'context', s.value ->> 'vartype', s.value ->> 'source', \
                 s.value ->> 'min_val', s.value ->> 'max_val', s.value ->> 'boot_val', s.value ->> 'reset_val' \
                 FROM json_each(pg_settings_json()) s",
    },
    // The session's SQL-level prepared statements and cursors, as it published them
    // (`functions::catalog::session_objects`); statements prepared through the protocol are not listed.
    View {
        name: "pg_prepared_statements",
        columns: "name:text, statement:text, prepare_time:timestamptz, parameter_types:text[], from_sql:bool, \
                  generic_plans:int8, custom_plans:int8",
        select: "SELECT s.value ->> 'name', s.value ->> 'statement', s.value ->> 'prepare_time', \
                 s.value ->> 'parameter_types', 1, 0, 0 FROM json_each(pg_prepared_statements_json()) s",
    },
    View {
        name: "pg_cursors",
        columns: "name:text, statement:text, is_holdable:bool, is_binary:bool, is_scrollable:bool, \
                  creation_time:timestamptz",
        select: "SELECT s.value ->> 'name', s.value ->> 'statement', s.value ->> 'is_holdable', 0, \
                 s.value ->> 'is_scrollable', s.value ->> 'creation_time' FROM json_each(pg_cursors_json()) s",
    },
    View {
        name: "pg_matviews",
        columns: "schemaname:name, matviewname:name, matviewowner:name, tablespace:name, hasindexes:bool, \
                  ispopulated:bool, definition:text",
        select: "SELECT NULL, NULL, NULL, NULL, 0, 0, NULL WHERE 0",
    },
    View {
        name: "pg_shdescription",
        columns: "objoid:oid, classoid:oid, description:text",
        select: "SELECT 0, 0, NULL WHERE 0",
    },
    View {
        name: "pg_inherits",
        columns: "inhrelid:oid, inhparent:oid, inhseqno:int4, inhdetachpending:bool",
        select: "SELECT 0, 0, 0, 0 WHERE 0",
    },
    View {
        name: "pg_trigger",
        columns: "oid:oid, tgrelid:oid, tgparentid:oid, tgname:name, tgfoid:oid, tgtype:int2, tgenabled:char, \
                  tgisinternal:bool, tgconstrrelid:oid, tgconstrindid:oid, tgconstraint:oid, tgdeferrable:bool, \
                  tginitdeferred:bool, tgnargs:int2, tgattr:text, tgargs:bytea, tgqual:text, tgoldtable:name, \
                  tgnewtable:name",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                 NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_policy",
        columns: "oid:oid, polname:name, polrelid:oid, polcmd:char, polpermissive:bool, polroles:oid[], \
                  polqual:text, polwithcheck:text",
        select: "SELECT 0, NULL, 0, NULL, 0, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_rewrite",
        columns: "oid:oid, rulename:name, ev_class:oid, ev_type:char, ev_enabled:char, is_instead:bool, ev_qual:text, ev_action:text",
        // Each view's `_RETURN` rule (its definition is the view's: `pg_get_viewdef`).
        select: "SELECT r.oid + 1, '_RETURN', r.oid, '1', 'O', 1, NULL, NULL FROM _pgc_rel r WHERE r.type = 'view'",
    },
    View {
        name: "pg_extension",
        columns: "oid:oid, extname:name, extowner:oid, extnamespace:oid, extrelocatable:bool, extversion:text, \
                  extconfig:oid[], extcondition:text[]",
        select: "VALUES (13526, 'plpgsql', 10, 11, 0, '1.0', NULL, NULL)",
    },
    // Catalogs of objects Cambium does not have (user casts, operators, operator families, conversions,
    // aggregates, text search configurations, access method members, user mappings): empty, for pg_dump.
    View {
        name: "pg_cast",
        columns: "oid:oid, castsource:oid, casttarget:oid, castfunc:oid, castcontext:char, castmethod:char",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_operator",
        columns: "oid:oid, oprname:name, oprnamespace:oid, oprowner:oid, oprkind:char, oprcanmerge:bool, \
                  oprcanhash:bool, oprleft:oid, oprright:oid, oprresult:oid, oprcom:oid, oprnegate:oid, \
                  oprcode:oid, oprrest:oid, oprjoin:oid",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_opfamily",
        columns: "oid:oid, opfmethod:oid, opfname:name, opfnamespace:oid, opfowner:oid",
        select: "SELECT NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_conversion",
        columns: "oid:oid, conname:name, connamespace:oid, conowner:oid, conforencoding:int4, contoencoding:int4, \
                  conproc:oid, condefault:bool",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_aggregate",
        columns: "aggfnoid:oid, aggkind:char, aggnumdirectargs:int2, aggtransfn:oid, aggfinalfn:oid, \
                  aggcombinefn:oid, aggserialfn:oid, aggdeserialfn:oid, aggmtransfn:oid, aggminvtransfn:oid, \
                  aggmfinalfn:oid, aggfinalextra:bool, aggmfinalextra:bool, aggfinalmodify:char, \
                  aggmfinalmodify:char, aggsortop:oid, aggtranstype:oid, aggtransspace:int4, aggmtranstype:oid, \
                  aggmtransspace:int4, agginitval:text, aggminitval:text",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_ts_parser",
        columns: "oid:oid, prsname:name, prsnamespace:oid, prsstart:oid, prstoken:oid, prsend:oid, \
                  prsheadline:oid, prslextype:oid",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_ts_dict",
        columns: "oid:oid, dictname:name, dictnamespace:oid, dictowner:oid, dicttemplate:oid, dictinitoption:text",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_ts_template",
        columns: "oid:oid, tmplname:name, tmplnamespace:oid, tmplinit:oid, tmpllexize:oid",
        select: "SELECT NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_ts_config",
        columns: "oid:oid, cfgname:name, cfgnamespace:oid, cfgowner:oid, cfgparser:oid",
        select: "SELECT NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_ts_config_map",
        columns: "mapcfg:oid, maptokentype:int4, mapseqno:int4, mapdict:oid",
        select: "SELECT NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_amop",
        columns: "oid:oid, amopfamily:oid, amoplefttype:oid, amoprighttype:oid, amopstrategy:int2, \
                  amoppurpose:char, amopopr:oid, amopmethod:oid, amopsortfamily:oid",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_amproc",
        columns: "oid:oid, amprocfamily:oid, amproclefttype:oid, amprocrighttype:oid, amprocnum:int2, amproc:oid",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_user_mapping",
        columns: "oid:oid, umuser:oid, umserver:oid, umoptions:text[]",
        select: "SELECT NULL, NULL, NULL, NULL WHERE 0",
    },
    // No security labels exist (pg_dump reads them).
    View {
        name: "pg_seclabels",
        columns: "objoid:oid, classoid:oid, objsubid:int4, objtype:text, objnamespace:oid, objname:text, \
                  provider:text, label:text",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    // Every index is a b-tree over its columns' default operator classes (`pg_index.indclass` names them):
    // PostgreSQL 15's default b-tree classes, with their OIDs (drizzle-kit joins them on `indclass`).
    // SQLAlchemy's inspector reads the non-default ones (none) to name them in an index's definition.
    View {
        name: "pg_opclass",
        columns: "oid:oid, opcmethod:oid, opcname:name, opcnamespace:oid, opcowner:oid, opcfamily:oid, \
                  opcintype:oid, opcdefault:bool, opckeytype:oid",
        select: "SELECT o.column1, 403, o.column2, 11, 10, 0, o.column3, 1, 0 FROM (VALUES \
                 (1978, 'int4_ops', 23), (1979, 'int2_ops', 21), (1981, 'oid_ops', 26), (3122, 'date_ops', 1082), \
                 (3123, 'float8_ops', 701), (3124, 'int8_ops', 20), (3125, 'numeric_ops', 1700), \
                 (3126, 'text_ops', 25), (3127, 'timestamptz_ops', 1184), (3128, 'timestamp_ops', 1114), \
                 (10000, 'array_ops', 2277), (10002, 'bit_ops', 1560), (10003, 'bool_ops', 16), \
                 (10004, 'bpchar_ops', 1042), (10006, 'bytea_ops', 17), (10007, 'char_ops', 18), \
                 (10012, 'float4_ops', 700), (10015, 'inet_ops', 869), (10022, 'interval_ops', 1186), \
                 (10024, 'macaddr_ops', 829), (10026, 'macaddr8_ops', 774), (10028, 'name_ops', 19), \
                 (10032, 'oidvector_ops', 30), (10034, 'record_ops', 2249), (10038, 'time_ops', 1083), \
                 (10041, 'timetz_ops', 1266), (10043, 'varbit_ops', 1562), (10047, 'money_ops', 790), \
                 (10050, 'tid_ops', 27), (10053, 'xid8_ops', 5069), (10065, 'uuid_ops', 2950), \
                 (10067, 'pg_lsn_ops', 3220), (10069, 'enum_ops', 3500), (10071, 'tsvector_ops', 3614), \
                 (10074, 'tsquery_ops', 3615), (10076, 'range_ops', 3831), (10080, 'multirange_ops', 4537), \
                 (10088, 'jsonb_ops', 3802)) o",
    },
    // No row-level security policies exist (drizzle-kit reads them).
    View {
        name: "pg_policies",
        columns: "schemaname:name, tablename:name, policyname:name, permissive:text, roles:name[], cmd:text, \
                  qual:text, with_check:text",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_collation",
        columns: "oid:oid, collname:name, collnamespace:oid, collowner:oid, collprovider:char, \
                  collisdeterministic:bool, collencoding:int4, collcollate:text, collctype:text",
        select: "VALUES (100, 'default', 11, 10, 'd', 1, -1, NULL, NULL), (950, 'C', 11, 10, 'c', 1, -1, 'C', 'C'), \
                 (951, 'POSIX', 11, 10, 'c', 1, -1, 'POSIX', 'POSIX')",
    },
    View {
        name: "pg_enum",
        columns: "oid:oid, enumtypid:oid, enumsortorder:float4, enumlabel:name",
        select: "SELECT 1610612736 + e.id * 1024 + 2 + CAST(j.key AS INTEGER), 1610612736 + e.id * 1024, \
                 json_extract(j.value, '$[1]'), json_extract(j.value, '$[0]') FROM _pgc_enumdefs e, json_each(e.labels) j",
    },
    View {
        name: "pg_statistic_ext",
        columns: "oid:oid, stxrelid:oid, stxname:name, stxnamespace:oid, stxowner:oid, stxstattarget:int4, \
                  stxkeys:text, stxkind:text[], stxexprs:text",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_publication",
        columns: "oid:oid, pubname:name, pubowner:oid, puballtables:bool, pubinsert:bool, pubupdate:bool, \
                  pubdelete:bool, pubtruncate:bool, pubviaroot:bool",
        select: "SELECT 0, NULL, 0, 0, 0, 0, 0, 0, 0 WHERE 0",
    },
    View {
        name: "pg_publication_rel",
        columns: "oid:oid, prpubid:oid, prrelid:oid, prqual:text, prattrs:int2[]",
        select: "SELECT 0, 0, 0, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_publication_namespace",
        columns: "oid:oid, pnpubid:oid, pnnspid:oid",
        select: "SELECT 0, 0, 0 WHERE 0",
    },
    View {
        name: "pg_stat_activity",
        columns: "datid:oid, datname:name, pid:int4, usesysid:oid, usename:name, application_name:text, \
                  client_addr:text, backend_start:text, state:text, query:text, backend_type:text",
        select: "SELECT 16384, pg_current_database(), pg_backend_pid(), 10, pg_current_user(), '', NULL, NULL, 'active', '', 'client backend'",
    },
    View {
        name: "pg_tablespace",
        columns: "oid:oid, spcname:name, spcowner:oid, spcacl:text, spcoptions:text[]",
        select: "VALUES (1663, 'pg_default', 10, NULL, NULL), (1664, 'pg_global', 10, NULL, NULL)",
    },
    View {
        name: "pg_partitioned_table",
        columns: "partrelid:oid, partstrat:char, partnatts:int2, partdefid:oid, partattrs:text, partclass:text, \
                  partcollation:text, partexprs:text",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_range",
        columns: "rngtypid:oid, rngsubtype:oid, rngmultitypid:oid, rngcollation:oid, rngsubopc:oid, \
                  rngcanonical:oid, rngsubdiff:oid",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_event_trigger",
        columns: "oid:oid, evtname:name, evtevent:name, evtowner:oid, evtfoid:oid, evtenabled:char, evttags:text[]",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_largeobject_metadata",
        columns: "oid:oid, lomowner:oid, lomacl:text[]",
        select: "SELECT NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_default_acl",
        columns: "oid:oid, defaclrole:oid, defaclnamespace:oid, defaclobjtype:char, defaclacl:text[]",
        select: "SELECT NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_init_privs",
        columns: "objoid:oid, classoid:oid, objsubid:int4, privtype:char, initprivs:text[]",
        select: "SELECT NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_subscription",
        columns: "oid:oid, subdbid:oid, subskiplsn:text, subname:name, subowner:oid, subenabled:bool, \
                  subbinary:bool, substream:bool, subtwophasestate:char, subdisableonerr:bool, subconninfo:text, \
                  subslotname:name, subsynccommit:text, subpublications:text[]",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_foreign_table",
        columns: "ftrelid:oid, ftserver:oid, ftoptions:text[]",
        select: "SELECT NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_foreign_server",
        columns: "oid:oid, srvname:name, srvowner:oid, srvfdw:oid, srvtype:text, srvversion:text, srvacl:text[], srvoptions:text[]",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_foreign_data_wrapper",
        columns: "oid:oid, fdwname:name, fdwowner:oid, fdwhandler:oid, fdwvalidator:oid, fdwacl:text[], fdwoptions:text[]",
        select: "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_seclabel",
        columns: "objoid:oid, classoid:oid, objsubid:int4, provider:text, label:text",
        select: "SELECT NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_transform",
        columns: "oid:oid, trftype:oid, trflang:oid, trffromsql:oid, trftosql:oid",
        select: "SELECT NULL, NULL, NULL, NULL, NULL WHERE 0",
    },
    View {
        name: "pg_language",
        columns: "oid:oid, lanname:name, lanowner:oid, lanispl:bool, lanpltrusted:bool, lanplcallfoid:oid, \
                  laninline:oid, lanvalidator:oid, lanacl:text[]",
        select: "VALUES (12, 'internal', 10, 0, 0, 0, 0, 2246, NULL), (13, 'c', 10, 0, 0, 0, 0, 2247, NULL), \
                 (14, 'sql', 10, 0, 1, 0, 0, 2248, NULL), (13525, 'plpgsql', 10, 1, 1, 13522, 13523, 13524, NULL)",
    },
];
