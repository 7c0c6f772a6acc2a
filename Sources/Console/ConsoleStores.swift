public import BotStorage
import BotSupport
public import IdentityCache
public import Identity
public import Bridge
public import ModerationLog
import Synchronization

/// What the console reads and writes in `bridge.sqlite3`: its audit table, the identity rows and the moderation
/// log. Not thread-safe (one SQLite connection under them); reached only through a ``ConsoleStoreAccess``.
///
/// `@unchecked Sendable`: handed to the one serialising owner of the connection (``ConsoleStoreAccess``), which
/// is its only user.
public struct ConsoleStores: @unchecked Sendable {
    public let audit: ConsoleAudit
    public let identities: PeerIdentityCache
    public let moderationLog: ModerationLog

    public init(audit: ConsoleAudit, identities: PeerIdentityCache, moderationLog: ModerationLog) {
        self.audit = audit
        self.identities = identities
        self.moderationLog = moderationLog
    }

    /// The console's stores on `database` (tables created if missing), with identities read through `identities`.
    public init(database: SQLiteDatabase, identities: PeerIdentityCache, moderationLog: ModerationLog) throws(SQLiteError) {
        self.init(audit: try ConsoleAudit(database: database), identities: identities, moderationLog: moderationLog)
    }
}

/// How the console reaches its ``ConsoleStores``: every call serialised with every other user of their
/// connection. In the bridge that is the coordinator, the one user of the bridge's connection (the runtime's
/// access runs each call on the coordinator's actor, so the process keeps one connection per database file);
/// ``LocalConsoleStores`` is a connection of the console's own, for a console without a bridge (tests).
public protocol ConsoleStoreAccess: Sendable {
    /// Runs `body` on the stores and returns its answer; nil when the stores could not be reached in time (the
    /// body then never runs). `changesBlocks`: the body may change who is blocked, so the bridge reloads its block
    /// list afterwards (a commit on the bridge's own connection does not move SQLite's `data_version`, which
    /// tells the coordinator about commits by other processes).
    func withStores<T: Sendable>(changesBlocks: Bool, _ body: @escaping @Sendable (ConsoleStores) -> T) -> T?
    /// Whether the bridge blocks or allows `key` now, and the site's records in force about it (issue 35: a mark may
    /// come from another stage); nil when the bridge cannot say (no bridge in this process, or no answer in time).
    func marksInForce(_ key: IdentityKey) -> BridgeCoordinator.MarksInForce?
}

extension ConsoleStoreAccess {
    public func marksInForce(_ key: IdentityKey) -> BridgeCoordinator.MarksInForce? { nil }
}

/// Console stores on a connection of their own, serialised by a lock: for a console that runs without a
/// bridge in its process (tests). Another process's coordinator sees its commits through `data_version`.
public final class LocalConsoleStores: ConsoleStoreAccess {
    private let stores: Mutex<ConsoleStores>

    /// Opens `<data-dir>/bridge.sqlite3` at `databasePath`.
    public init(databasePath: String) throws(ConsoleService.OpenError) {
        do {
            let database = try SQLiteDatabase(path: databasePath)
            let identities = PeerIdentityCache(
                store: try SQLiteIdentityStore(database: database), logger: Logger(label: "console", level: .warning))
            let log = try ModerationLog(database: database, config: ModerationLogConfig(), logger: nil)
            stores = Mutex(try ConsoleStores(database: database, identities: identities, moderationLog: log))
        } catch {
            throw ConsoleService.OpenError(description: "console database \(databasePath): \(error)")
        }
    }

    public func withStores<T: Sendable>(changesBlocks: Bool, _ body: @escaping @Sendable (ConsoleStores) -> T) -> T? {
        stores.withLock { body($0) }
    }
}
