import BotStorage
import BridgeApp
import BotSupport
import Console

#if canImport(Glibc)
import Glibc
#endif

/// The CLI's moderation changes in the console's audit (issue 35: `identities` marks and `modlog release` made on the
/// command line were missing from it), one row each in the data directory's database, named by the local user who
/// made them (`cli:<user>`, as the console's rows name how the moderator signed in). A row that cannot be written is
/// said on stderr; the change itself stands.
enum CLIAudit {
    /// On the connection the command has open.
    /// Who the audit names for this command: `cli:<user>`.
    static var principal: String {
        "cli:" + (ProcessEnvironment.value("USER") ?? ProcessEnvironment.value("LOGNAME") ?? "uid \(getuid())")
    }

    static func record(action: String, target: String, database: SQLiteDatabase) {
        do {
            try ConsoleAudit(database: database).append(ConsoleAuditEntry(
                at: wallClockNow(), action: action, target: target, remote: "local", outcome: "ok", principal: principal))
        } catch {
            printError("warning: the console's audit could not record this \(action): \(error)")
        }
    }

    /// For a command that has no connection open: one to `dataDirectory`'s database for the row.
    static func record(action: String, target: String, dataDirectory: String) {
        do {
            let database = try SQLiteDatabase(path: FileIO.join(dataDirectory, "bridge.sqlite3"))
            defer { database.close() }
            record(action: action, target: target, database: database)
        } catch {
            printError("warning: the console's audit could not record this \(action): \(error)")
        }
    }
}
