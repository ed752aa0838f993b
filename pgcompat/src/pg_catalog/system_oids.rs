//! The OIDs of PostgreSQL 15's system catalogs, which a catalog row's `tableoid` system column holds (pg_dump
//! reads `tableoid, oid` of every object it dumps, and tells objects apart by the pair). Fixed numbers in
//! PostgreSQL (from its `pg_class`), so they are data here.

/// `(catalog, its OID)`, sorted by name.
const SYSTEM_CATALOGS: &[(&str, i64)] = &[
    ("pg_aggregate", 2600),
    ("pg_am", 2601),
    ("pg_amop", 2602),
    ("pg_amproc", 2603),
    ("pg_attrdef", 2604),
    ("pg_attribute", 1249),
    ("pg_auth_members", 1261),
    ("pg_authid", 1260),
    ("pg_cast", 2605),
    ("pg_class", 1259),
    ("pg_collation", 3456),
    ("pg_constraint", 2606),
    ("pg_conversion", 2607),
    ("pg_database", 1262),
    ("pg_db_role_setting", 2964),
    ("pg_default_acl", 826),
    ("pg_depend", 2608),
    ("pg_description", 2609),
    ("pg_enum", 3501),
    ("pg_event_trigger", 3466),
    ("pg_extension", 3079),
    ("pg_foreign_data_wrapper", 2328),
    ("pg_foreign_server", 1417),
    ("pg_foreign_table", 3118),
    ("pg_index", 2610),
    ("pg_inherits", 2611),
    ("pg_init_privs", 3394),
    ("pg_language", 2612),
    ("pg_largeobject", 2613),
    ("pg_largeobject_metadata", 2995),
    ("pg_namespace", 2615),
    ("pg_opclass", 2616),
    ("pg_operator", 2617),
    ("pg_opfamily", 2753),
    ("pg_parameter_acl", 6243),
    ("pg_partitioned_table", 3350),
    ("pg_policy", 3256),
    ("pg_proc", 1255),
    ("pg_publication", 6104),
    ("pg_publication_namespace", 6237),
    ("pg_publication_rel", 6106),
    ("pg_range", 3541),
    ("pg_replication_origin", 6000),
    ("pg_rewrite", 2618),
    ("pg_seclabel", 3596),
    ("pg_sequence", 2224),
    ("pg_shdepend", 1214),
    ("pg_shdescription", 2396),
    ("pg_shseclabel", 3592),
    ("pg_statistic", 2619),
    ("pg_statistic_ext", 3381),
    ("pg_statistic_ext_data", 3429),
    ("pg_subscription", 6100),
    ("pg_subscription_rel", 6102),
    ("pg_tablespace", 1213),
    ("pg_transform", 3576),
    ("pg_trigger", 2620),
    ("pg_ts_config", 3602),
    ("pg_ts_config_map", 3603),
    ("pg_ts_dict", 3600),
    ("pg_ts_parser", 3601),
    ("pg_ts_template", 3764),
    ("pg_type", 1247),
    ("pg_user_mapping", 1418),
];

/// The OID of the system catalog `name` (as written, `pg_catalog.` dropped, or the layer's view of it
/// `_pgc_pg_…`): the `tableoid` of each of its rows. `None` for anything else.
pub fn system_catalog_oid(name: &str) -> Option<i64> {
    let name = name.strip_prefix("_pgc_").unwrap_or(name).to_ascii_lowercase();
    SYSTEM_CATALOGS
        .binary_search_by(|(catalog, _)| catalog.cmp(&name.as_str()))
        .ok()
        .map(|index| SYSTEM_CATALOGS[index].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogs_are_found_by_any_spelling() {
        assert!(
            SYSTEM_CATALOGS.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted for the search"
        );
        assert_eq!(system_catalog_oid("pg_class"), Some(1259));
        assert_eq!(system_catalog_oid("_pgc_pg_extension"), Some(3079));
        assert_eq!(system_catalog_oid("PG_TYPE"), Some(1247));
        assert_eq!(system_catalog_oid("items"), None);
    }
}
