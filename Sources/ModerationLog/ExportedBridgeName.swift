public import BotStorage

/// The name a bridge gives itself (its nickname, as site records and heartbeats name its stage), kept in the bridge
/// database so that `modlog export` — run with no bridge, from the data directory alone — can put it in the bridge
/// column of every row this bridge wrote (issue 35: an incident report of a site merges several stages' rows).
/// Written at every start; a database no bridge of this version started on has none (the column is then empty).
///
/// Schema (component `bridge_name`, version 1): one row, `name`.
public enum ExportedBridgeName {
    public static func store(_ name: String, in database: SQLiteDatabase) throws(SQLiteError) {
        try prepare(database)
        try database.prepare("INSERT INTO bridge_name(id, name) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name")
            .run([.text(name)])
    }

    public static func load(from database: SQLiteDatabase) throws(SQLiteError) -> String? {
        try prepare(database)
        return try database.prepare("SELECT name FROM bridge_name WHERE id = 1").query([]) { $0.text(0) }.first
    }

    private static func prepare(_ database: SQLiteDatabase) throws(SQLiteError) {
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS bridge_name(id INTEGER PRIMARY KEY CHECK (id = 1), name TEXT NOT NULL);
            INSERT OR IGNORE INTO schema_versions VALUES ('bridge_name', 1);
            """)
    }
}
