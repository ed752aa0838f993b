// pgjdbc (the PostgreSQL JDBC driver, Debian's libpostgresql-jdbc-java) against a Cambium database (CLIENTS_URI):
// the driver Java applications, Hibernate, Flyway, Liquibase and DBeaver use. It speaks the extended protocol,
// prepares a statement on the server once it ran 5 times (named statements), reads result sets in batches of
// the fetch size through portals, and answers DatabaseMetaData with large pg_catalog queries. Each check prints
// `PASS <name>` or `FAIL <name>: <error on one line>` (the protocol of scripts/clients.sh).
//
// Run as a single source file: java -cp postgresql.jar JdbcCheck.java

import java.io.StringReader;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.net.URI;
import java.sql.Array;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.sql.Types;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;

public class JdbcCheck {
    static final int ERROR_CHARS_MAX = 400;
    static final Set<String> failed = new HashSet<>();
    static String url;
    static Properties props = new Properties();

    interface Body {
        void run() throws Exception;
    }

    static void check(String name, Body body, String... needs) {
        String full = "jdbc." + name;
        for (String need : needs) {
            if (failed.contains("jdbc." + need)) {
                failed.add(full);
                System.out.println("FAIL " + full + ": not run: jdbc." + need + " failed");
                return;
            }
        }
        try {
            body.run();
            System.out.println("PASS " + full);
        } catch (Throwable error) {
            failed.add(full);
            String state = error instanceof SQLException ? " [" + ((SQLException) error).getSQLState() + "]" : "";
            String text = (error.getClass().getSimpleName() + state + ": " + error.getMessage()).replaceAll("\\s+", " ");
            if (text.length() > ERROR_CHARS_MAX) {
                text = text.substring(0, ERROR_CHARS_MAX - 3) + "...";
            }
            System.out.println("FAIL " + full + ": " + text);
            error.printStackTrace();
        }
        System.out.flush();
    }

    static void expect(String what, Object got, Object want) {
        boolean same = (got instanceof byte[] && want instanceof byte[])
                ? Arrays.equals((byte[]) got, (byte[]) want)
                : Objects.equals(got, want);
        if (!same) {
            throw new AssertionError(what + ": got " + show(got) + ", want " + show(want));
        }
    }

    static String show(Object value) {
        if (value instanceof byte[]) {
            return Arrays.toString((byte[]) value);
        }
        return value == null ? "null" : value + " (" + value.getClass().getSimpleName() + ")";
    }

    static Connection connect() throws SQLException {
        return DriverManager.getConnection(url, props);
    }

    /** `postgresql://user:password@host:port/db?…` as a JDBC URL and properties (TLS not required). */
    static void parse(String uri) throws Exception {
        URI parsed = new URI(uri.replaceFirst("^postgres(ql)?://", "http://"));
        String[] userInfo = parsed.getRawUserInfo().split(":", 2);
        props.setProperty("user", java.net.URLDecoder.decode(userInfo[0], "UTF-8"));
        props.setProperty("password", java.net.URLDecoder.decode(userInfo[1], "UTF-8"));
        props.setProperty("sslmode", "prefer");
        props.setProperty("connectTimeout", "10");
        url = "jdbc:postgresql://" + parsed.getHost() + ":" + parsed.getPort() + parsed.getPath();
    }

    static void exec(Connection conn, String sql) throws SQLException {
        try (Statement statement = conn.createStatement()) {
            statement.execute(sql);
        }
    }

    public static void main(String[] args) throws Exception {
        String uri = System.getenv("CLIENTS_URI");
        if (uri == null || uri.isEmpty()) {
            System.err.println("CLIENTS_URI is not set");
            System.exit(2);
        }
        parse(uri);

        check("connect", () -> {
            try (Connection conn = connect()) {
                DatabaseMetaData meta = conn.getMetaData();
                if (meta.getDatabaseMajorVersion() < 15) {
                    throw new AssertionError("server version " + meta.getDatabaseProductVersion());
                }
                try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("SELECT 1 AS one")) {
                    rs.next();
                    expect("SELECT 1", rs.getInt("one"), 1);
                }
            }
        });

        check("types", () -> {
            try (Connection conn = connect()) {
                exec(conn, "DROP TABLE IF EXISTS jdbc_types");
                exec(conn, "CREATE TABLE jdbc_types (id serial PRIMARY KEY, i int, b bigint, f float8, t text, by bytea,"
                        + " ok boolean, ts timestamp, tz timestamptz, d date, tm time, n numeric(12,4), u uuid,"
                        + " ia int[], ta text[], j jsonb)");
                OffsetDateTime tz = OffsetDateTime.of(2024, 2, 29, 13, 14, 15, 123456000, ZoneOffset.ofHours(2));
                LocalDateTime ts = LocalDateTime.of(2024, 2, 29, 13, 14, 15, 123456000);
                UUID u = UUID.fromString("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
                byte[] bytes = new byte[] {0, 1, 39, 92, (byte) 255};
                try (PreparedStatement p = conn.prepareStatement("INSERT INTO jdbc_types (i, b, f, t, by, ok, ts, tz, d, tm,"
                        + " n, u, ia, ta, j) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb)")) {
                    p.setInt(1, 42);
                    p.setLong(2, 1L << 40);
                    p.setDouble(3, 1.25);
                    p.setString(4, "h\u00e9llo 'q' \\ \u20ac");
                    p.setBytes(5, bytes);
                    p.setBoolean(6, true);
                    p.setObject(7, ts);
                    p.setObject(8, tz);
                    p.setObject(9, LocalDate.of(2024, 2, 29));
                    p.setObject(10, LocalTime.of(13, 14, 15));
                    p.setBigDecimal(11, new BigDecimal("12345.6789"));
                    p.setObject(12, u);
                    p.setArray(13, conn.createArrayOf("int4", new Integer[] {1, 2, 3}));
                    p.setArray(14, conn.createArrayOf("text", new String[] {"a", "b c", null}));
                    p.setString(15, "{\"k\": [1, true, null]}");
                    expect("rows inserted", p.executeUpdate(), 1);
                }
                try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("SELECT * FROM jdbc_types")) {
                    rs.next();
                    expect("int", rs.getInt("i"), 42);
                    expect("bigint", rs.getLong("b"), 1L << 40);
                    expect("float8", rs.getDouble("f"), 1.25);
                    expect("text", rs.getString("t"), "h\u00e9llo 'q' \\ \u20ac");
                    expect("bytea", rs.getBytes("by"), bytes);
                    expect("boolean", rs.getBoolean("ok"), true);
                    expect("timestamp", rs.getObject("ts", LocalDateTime.class), ts);
                    expect("timestamptz", rs.getObject("tz", OffsetDateTime.class).toInstant(), tz.toInstant());
                    expect("date", rs.getObject("d", LocalDate.class), LocalDate.of(2024, 2, 29));
                    expect("time", rs.getObject("tm", LocalTime.class), LocalTime.of(13, 14, 15));
                    expect("numeric", rs.getBigDecimal("n"), new BigDecimal("12345.6789"));
                    expect("uuid", rs.getObject("u"), u);
                    Array ia = rs.getArray("ia");
                    expect("int[]", Arrays.asList((Integer[]) ia.getArray()), List.of(1, 2, 3));
                    expect("text[]", Arrays.asList((String[]) rs.getArray("ta").getArray()), Arrays.asList("a", "b c", null));
                    expect("jsonb", rs.getString("j"), "{\"k\": [1, true, null]}");
                    ResultSetMetaData md = rs.getMetaData();
                    List<String> names = new ArrayList<>();
                    for (int c = 1; c <= md.getColumnCount(); c++) {
                        names.add(md.getColumnTypeName(c));
                    }
                    expect("column types", names, List.of("serial", "int4", "int8", "float8", "text", "bytea", "bool",
                            "timestamp", "timestamptz", "date", "time", "numeric", "uuid", "_int4", "_text", "jsonb"));
                    // From the RowDescription's table OID, column number and type modifier.
                    expect("serial is auto-increment", md.isAutoIncrement(1), true);
                    expect("int is not", md.isAutoIncrement(2), false);
                    expect("numeric(12,4) precision", md.getPrecision(12), 12);
                    expect("numeric(12,4) scale", md.getScale(12), 4);
                    expect("table name", md.getTableName(2), "jdbc_types");
                    expect("nullable", md.isNullable(1), ResultSetMetaData.columnNoNulls);
                }
                try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("SELECT i + 1 AS j FROM jdbc_types")) {
                    ResultSetMetaData md = rs.getMetaData();
                    expect("an expression's table", md.getTableName(1), "");
                }
            }
        }, "connect");

        check("server_prepared", () -> {
            try (Connection conn = connect()) {
                exec(conn, "DROP TABLE IF EXISTS jdbc_prep");
                exec(conn, "CREATE TABLE jdbc_prep (id int PRIMARY KEY, name text)");
                // Past prepareThreshold (5) the driver uses a named server-side statement.
                try (PreparedStatement insert = conn.prepareStatement("INSERT INTO jdbc_prep VALUES (?, ?)");
                        PreparedStatement read = conn.prepareStatement("SELECT name FROM jdbc_prep WHERE id = ?")) {
                    for (int i = 1; i <= 12; i++) {
                        insert.setInt(1, i);
                        insert.setString(2, "n" + i);
                        insert.executeUpdate();
                        read.setInt(1, i);
                        try (ResultSet rs = read.executeQuery()) {
                            rs.next();
                            expect("read back " + i, rs.getString(1), "n" + i);
                        }
                    }
                }
            }
        }, "connect");

        check("batches_and_generated_keys", () -> {
            try (Connection conn = connect()) {
                exec(conn, "DROP TABLE IF EXISTS jdbc_batch");
                exec(conn, "CREATE TABLE jdbc_batch (id bigserial PRIMARY KEY, name text NOT NULL, qty int DEFAULT 1)");
                try (PreparedStatement p = conn.prepareStatement("INSERT INTO jdbc_batch (name) VALUES (?)")) {
                    for (int i = 0; i < 50; i++) {
                        p.setString(1, "b" + i);
                        p.addBatch();
                    }
                    int[] counts = p.executeBatch();
                    expect("batch size", counts.length, 50);
                }
                try (PreparedStatement p = conn.prepareStatement("INSERT INTO jdbc_batch (name) VALUES (?)",
                        Statement.RETURN_GENERATED_KEYS)) {
                    p.setString(1, "keyed");
                    p.executeUpdate();
                    try (ResultSet keys = p.getGeneratedKeys()) {
                        keys.next();
                        expect("generated id", keys.getLong("id"), 51L);
                        expect("generated default", keys.getInt("qty"), 1);
                    }
                }
            }
        }, "connect");

        check("transactions", () -> {
            try (Connection conn = connect()) {
                exec(conn, "DROP TABLE IF EXISTS jdbc_tx");
                exec(conn, "CREATE TABLE jdbc_tx (id int PRIMARY KEY)");
                conn.setAutoCommit(false);
                exec(conn, "INSERT INTO jdbc_tx VALUES (1)");
                Savepoint sp = conn.setSavepoint();
                exec(conn, "INSERT INTO jdbc_tx VALUES (2)");
                try {
                    exec(conn, "INSERT INTO jdbc_tx VALUES (1)");
                    throw new AssertionError("a duplicate key was accepted");
                } catch (SQLException duplicate) {
                    expect("SQLSTATE", duplicate.getSQLState(), "23505");
                }
                conn.rollback(sp);
                conn.commit();
                exec(conn, "INSERT INTO jdbc_tx VALUES (3)");
                conn.rollback();
                conn.setTransactionIsolation(Connection.TRANSACTION_SERIALIZABLE);
                try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("SELECT id FROM jdbc_tx ORDER BY id")) {
                    List<Integer> ids = new ArrayList<>();
                    while (rs.next()) {
                        ids.add(rs.getInt(1));
                    }
                    expect("rows", ids, List.of(1));
                }
                conn.commit();
            }
        }, "connect");

        check("fetch_size_portal", () -> {
            try (Connection conn = connect()) {
                conn.setAutoCommit(false);
                try (Statement s = conn.createStatement()) {
                    s.setFetchSize(10);
                    try (ResultSet rs = s.executeQuery("SELECT g FROM generate_series(1, 95) AS g")) {
                        long sum = 0;
                        int rows = 0;
                        while (rs.next()) {
                            sum += rs.getInt(1);
                            rows++;
                        }
                        expect("rows", rows, 95);
                        expect("sum", sum, 4560L);
                    }
                }
                conn.commit();
            }
        }, "connect");

        check("metadata_tables", () -> {
            try (Connection conn = connect()) {
                exec(conn, "DROP TABLE IF EXISTS jdbc_child");
                exec(conn, "DROP TABLE IF EXISTS jdbc_parent");
                exec(conn, "CREATE TABLE jdbc_parent (id int PRIMARY KEY, name varchar(40) NOT NULL UNIQUE)");
                exec(conn, "CREATE TABLE jdbc_child (id bigint PRIMARY KEY, parent int REFERENCES jdbc_parent (id),"
                        + " note text)");
                exec(conn, "CREATE INDEX jdbc_child_note ON jdbc_child (note)");
                List<String> tables = new ArrayList<>();
                try (ResultSet rs = conn.getMetaData().getTables(null, "public", "jdbc_%", new String[] {"TABLE"})) {
                    while (rs.next()) {
                        tables.add(rs.getString("TABLE_NAME"));
                    }
                }
                tables.retainAll(List.of("jdbc_batch", "jdbc_child", "jdbc_parent", "jdbc_prep", "jdbc_tx"));
                expect("tables", tables, List.of("jdbc_batch", "jdbc_child", "jdbc_parent", "jdbc_prep", "jdbc_tx"));
            }
        }, "batches_and_generated_keys", "transactions", "server_prepared");

        check("metadata_columns", () -> {
            try (Connection conn = connect()) {
                List<String> columns = new ArrayList<>();
                try (ResultSet rs = conn.getMetaData().getColumns(null, "public", "jdbc_parent", "%")) {
                    while (rs.next()) {
                        columns.add(rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME") + "("
                                + rs.getInt("COLUMN_SIZE") + ") " + rs.getString("IS_NULLABLE"));
                    }
                }
                expect("columns", columns, List.of("id int4(10) NO", "name varchar(40) NO"));
            }
        }, "metadata_tables");

        check("metadata_primary_keys", () -> {
            try (Connection conn = connect()) {
                try (ResultSet rs = conn.getMetaData().getPrimaryKeys(null, "public", "jdbc_child")) {
                    rs.next();
                    expect("primary key", rs.getString("COLUMN_NAME"), "id");
                }
                // A key of two columns, in the key's order (not the table's).
                exec(conn, "DROP TABLE IF EXISTS jdbc_pair");
                exec(conn, "CREATE TABLE jdbc_pair (a int, b int, c text, PRIMARY KEY (b, a))");
                List<String> keys = new ArrayList<>();
                try (ResultSet rs = conn.getMetaData().getPrimaryKeys(null, "public", "jdbc_pair")) {
                    while (rs.next()) {
                        keys.add(rs.getString("COLUMN_NAME") + rs.getShort("KEY_SEQ") + " " + rs.getString("PK_NAME"));
                    }
                }
                expect("composite primary key", keys, List.of("b1 jdbc_pair_pkey", "a2 jdbc_pair_pkey"));
            }
        }, "metadata_tables");

        check("metadata_foreign_keys", () -> {
            try (Connection conn = connect()) {
                try (ResultSet rs = conn.getMetaData().getImportedKeys(null, "public", "jdbc_child")) {
                    rs.next();
                    expect("foreign key", rs.getString("PKTABLE_NAME") + "." + rs.getString("PKCOLUMN_NAME") + " <- "
                            + rs.getString("FKCOLUMN_NAME"), "jdbc_parent.id <- parent");
                }
            }
        }, "metadata_tables");

        check("metadata_indexes", () -> {
            try (Connection conn = connect()) {
                Set<String> indexes = new HashSet<>();
                try (ResultSet rs = conn.getMetaData().getIndexInfo(null, "public", "jdbc_child", false, false)) {
                    while (rs.next()) {
                        indexes.add(rs.getString("INDEX_NAME"));
                    }
                }
                expect("indexes", indexes, Set.of("jdbc_child_pkey", "jdbc_child_note"));
                // Each key of an index: its position, column (or expression) and direction.
                exec(conn, "DROP TABLE IF EXISTS jdbc_keys");
                exec(conn, "CREATE TABLE jdbc_keys (a int, b text)");
                exec(conn, "CREATE UNIQUE INDEX jdbc_keys_i ON jdbc_keys (b DESC, a, lower(b))");
                List<String> keys = new ArrayList<>();
                try (ResultSet rs = conn.getMetaData().getIndexInfo(null, "public", "jdbc_keys", false, false)) {
                    while (rs.next()) {
                        keys.add(rs.getString("INDEX_NAME") + " " + rs.getShort("ORDINAL_POSITION") + " "
                                + rs.getString("COLUMN_NAME") + " " + rs.getString("ASC_OR_DESC") + " " + rs.getBoolean("NON_UNIQUE"));
                    }
                }
                expect("index keys", keys, List.of("jdbc_keys_i 1 b D false", "jdbc_keys_i 2 a A false",
                        "jdbc_keys_i 3 lower(b) A false"));
            }
        }, "metadata_tables");

        check("copy", () -> {
            try (Connection conn = connect()) {
                exec(conn, "DROP TABLE IF EXISTS jdbc_copy");
                exec(conn, "CREATE TABLE jdbc_copy (id int PRIMARY KEY, name text)");
                org.postgresql.copy.CopyManager copy = conn.unwrap(org.postgresql.PGConnection.class).getCopyAPI();
                long copied = copy.copyIn("COPY jdbc_copy FROM STDIN WITH (FORMAT csv)", new StringReader("1,\"a, b\"\n2,\n3,c\n"));
                expect("rows copied in", copied, 3L);
                StringWriter out = new StringWriter();
                copy.copyOut("COPY (SELECT id, name FROM jdbc_copy ORDER BY id) TO STDOUT WITH (FORMAT csv)", out);
                expect("copied out", out.toString(), "1,\"a, b\"\n2,\n3,c\n");
            }
        }, "connect");

        check("listen_notify", () -> {
            try (Connection listener = connect(); Connection notifier = connect()) {
                exec(listener, "LISTEN jdbc_events");
                exec(notifier, "NOTIFY jdbc_events, 'hello'");
                org.postgresql.PGNotification[] got = listener.unwrap(org.postgresql.PGConnection.class).getNotifications(10000);
                expect("notifications", got == null ? 0 : got.length, 1);
                expect("payload", got[0].getParameter(), "hello");
            }
        }, "connect");

        check("errors", () -> {
            try (Connection conn = connect()) {
                String[][] cases = {
                    {"SELECT 1/0", "22012"},
                    {"SELECT * FROM jdbc_missing", "42P01"},
                    {"SELEC 1", "42601"},
                    {"SELECT 'x'::int", "22P02"},
                };
                for (String[] c : cases) {
                    try {
                        exec(conn, c[0]);
                        throw new AssertionError(c[0] + ": no error");
                    } catch (SQLException error) {
                        expect(c[0], error.getSQLState(), c[1]);
                    }
                }
                try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("SELECT 2")) {
                    rs.next();
                    expect("after the errors", rs.getInt(1), 2);
                }
            }
        }, "connect");
    }
}
