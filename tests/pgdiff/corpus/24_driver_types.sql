-- What drivers that introspect types ask (asyncpg looks up every type OID it has no codec for with a recursive
-- query over pg_type, then sends parameters typed as described): enum arrays (casts, columns, ANY, a label
-- outside the type refused), `0::regtype` and `format_type(0, …)` printed as a dash, the containment and key
-- operators, and asyncpg's own introspection query (PostgreSQL 13+ form) for built-in array types.
CREATE TYPE drv_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE drv_enum (id integer PRIMARY KEY, mood drv_mood, moods drv_mood[]);
INSERT INTO drv_enum VALUES (1, 'happy', '{sad,ok}'), (2, 'sad', ARRAY['happy']::drv_mood[]), (3, NULL, NULL);
SELECT id, mood, moods FROM drv_enum ORDER BY id;
SELECT '{ok,happy}'::drv_mood[];
SELECT ARRAY['happy', 'sad']::drv_mood[];
SELECT '{ok,angry}'::drv_mood[];
SELECT '{ok,NULL}'::drv_mood[];
INSERT INTO drv_enum VALUES (4, 'ok', '{angry}');
INSERT INTO drv_enum VALUES (4, 'ok', '{}');
SELECT id, moods FROM drv_enum WHERE id = 4;
SELECT id FROM drv_enum WHERE mood = ANY('{ok,happy}'::drv_mood[]) ORDER BY id;
SELECT id FROM drv_enum WHERE 'ok' = ANY(moods) ORDER BY id;
SELECT array_agg(mood ORDER BY mood) FROM drv_enum WHERE mood IS NOT NULL;
SELECT pg_typeof(moods)::text FROM drv_enum WHERE id = 1;
UPDATE drv_enum SET moods = '{happy,happy}' WHERE id = 3 RETURNING id, moods;
UPDATE drv_enum SET moods = '{happy,glad}' WHERE id = 3;
SELECT format_type(0, NULL), 0::regtype::text, format_type(23, NULL), format_type(1007, NULL);
SELECT t.typname, t.typelem::regtype::text, t.typdelim FROM pg_type t WHERE t.oid IN (1007, 1009, 2951) ORDER BY t.oid;
SELECT '{"a": 1, "b": [1, 2]}'::jsonb @> '{"a": 1}', '{"a": 1}'::jsonb <@ '{"a": 1, "c": 2}', '{"a": 1}'::jsonb ? 'a';
SELECT '{"a": 1, "b": 2}'::jsonb ?| ARRAY['b', 'z'], '{"a": 1, "b": 2}'::jsonb ?& ARRAY['a', 'z'];
SELECT '{"a": {"b": [5, 6]}}'::jsonb #> '{a,b,1}', '{"a": {"b": [5, 6]}}'::jsonb #>> '{a,b}', '{"a": {"b": 1}, "c": 2}'::jsonb #- '{a,b}';
SELECT ARRAY[1, 2, 3] @> ARRAY[3], ARRAY[1, 2] && ARRAY[2, 9], ARRAY['x'] <@ ARRAY['x', 'y'];
WITH RECURSIVE typeinfo_tree(
    oid, ns, name, kind, basetype, elemtype, elemdelim,
    range_subtype, attrtypoids, attrnames, depth)
AS (
    SELECT
        ti.oid, ti.ns, ti.name, ti.kind, ti.basetype,
        ti.elemtype, ti.elemdelim, ti.range_subtype,
        ti.attrtypoids, ti.attrnames, 0
    FROM
        (
        SELECT
            t.oid                           AS oid,
            ns.nspname                      AS ns,
            t.typname                       AS name,
            t.typtype                       AS kind,
            (CASE WHEN t.typtype = 'd' THEN
                (WITH RECURSIVE typebases(oid, depth) AS (
                    SELECT
                        t2.typbasetype      AS oid,
                        0                   AS depth
                    FROM
                        pg_type t2
                    WHERE
                        t2.oid = t.oid

                    UNION ALL

                    SELECT
                        t2.typbasetype      AS oid,
                        tb.depth + 1        AS depth
                    FROM
                        pg_type t2,
                        typebases tb
                    WHERE
                       tb.oid = t2.oid
                       AND t2.typbasetype != 0
               ) SELECT oid FROM typebases ORDER BY depth DESC LIMIT 1)

               ELSE NULL
            END)                            AS basetype,
            t.typelem                       AS elemtype,
            elem_t.typdelim                 AS elemdelim,
            range_t.rngsubtype              AS range_subtype,
            (CASE WHEN t.typtype = 'c' THEN
                (SELECT
                    array_agg(ia.atttypid ORDER BY ia.attnum)
                FROM
                    pg_attribute ia
                    INNER JOIN pg_class c
                        ON (ia.attrelid = c.oid)
                WHERE
                    ia.attnum > 0 AND NOT ia.attisdropped
                    AND c.reltype = t.oid)

                ELSE NULL
            END)                            AS attrtypoids,
            (CASE WHEN t.typtype = 'c' THEN
                (SELECT
                    array_agg(ia.attname::text ORDER BY ia.attnum)
                FROM
                    pg_attribute ia
                    INNER JOIN pg_class c
                        ON (ia.attrelid = c.oid)
                WHERE
                    ia.attnum > 0 AND NOT ia.attisdropped
                    AND c.reltype = t.oid)

                ELSE NULL
            END)                            AS attrnames
        FROM
            pg_catalog.pg_type AS t
            INNER JOIN pg_catalog.pg_namespace ns ON (
                ns.oid = t.typnamespace)
            LEFT JOIN pg_type elem_t ON (
                t.typlen = -1 AND
                t.typelem != 0 AND
                t.typelem = elem_t.oid
            )
            LEFT JOIN pg_range range_t ON (
                t.oid = range_t.rngtypid
            )
        ) AS ti
    WHERE
        ti.oid = any('{1007,1009,2951,1231}'::oid[])

    UNION ALL

    SELECT
        ti.oid, ti.ns, ti.name, ti.kind, ti.basetype,
        ti.elemtype, ti.elemdelim, ti.range_subtype,
        ti.attrtypoids, ti.attrnames, tt.depth + 1
    FROM
        (
        SELECT
            t.oid                           AS oid,
            ns.nspname                      AS ns,
            t.typname                       AS name,
            t.typtype                       AS kind,
            NULL::oid                       AS basetype,
            t.typelem                       AS elemtype,
            elem_t.typdelim                 AS elemdelim,
            range_t.rngsubtype              AS range_subtype,
            NULL::oid[]                     AS attrtypoids,
            NULL::text[]                    AS attrnames
        FROM
            pg_catalog.pg_type AS t
            INNER JOIN pg_catalog.pg_namespace ns ON (
                ns.oid = t.typnamespace)
            LEFT JOIN pg_type elem_t ON (
                t.typlen = -1 AND
                t.typelem != 0 AND
                t.typelem = elem_t.oid
            )
            LEFT JOIN pg_range range_t ON (
                t.oid = range_t.rngtypid
            )
        ) ti,
        typeinfo_tree tt
    WHERE
        (tt.elemtype IS NOT NULL AND ti.oid = tt.elemtype)
        OR (tt.attrtypoids IS NOT NULL AND ti.oid = any(tt.attrtypoids))
        OR (tt.range_subtype IS NOT NULL AND ti.oid = tt.range_subtype)
        OR (tt.basetype IS NOT NULL AND ti.oid = tt.basetype)
)
SELECT DISTINCT
    *,
    basetype::regtype::text AS basetype_name,
    elemtype::regtype::text AS elemtype_name,
    range_subtype::regtype::text AS range_subtype_name
FROM
    typeinfo_tree
ORDER BY
    depth DESC, oid;
