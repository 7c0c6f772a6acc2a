import BitchatWire
import BotCrypto
import BotStorage
import BotSupport
import Bridge
import BridgeCore
import Console
import Identity
import IdentityCache
import MeshSyncStorage
import ModerationLog
import Nostr
import SpamFilter

/// What the data directory holds for a running bridge, opened: the key file, the one SQLite connection and every
/// store on it, the operator's policy file, the console's denylist, the fleet's operator key. One builder of the
/// composition root (``BridgeRuntime/start(config:logger:configPath:host:)``).
///
/// One SQLite connection serves every store of `bridge.sqlite3` (event ids, pending uplinks, the stranger cache,
/// the moderation log, the sync table, the board ledger, the console's audit table): all of them are used only
/// from the coordinator's actor (the console's through ``CoordinatorConsoleStores``), and the stop's checkpoint
/// runs on the same connection after every service has finished. (Several connections in one process also shared
/// POSIX locks in ways that made a stop's checkpoint fail now and then; see ``SQLiteDatabase``.)
///
/// `@unchecked Sendable`: the stores are not thread-safe; after start only the coordinator uses them (its actor
/// serialises every call) and the stop's checkpoint runs once every service has finished.
struct RuntimeStores: @unchecked Sendable {
    let dataDirectory: String
    /// Held from before the key file is read until the stop (``close(logger:)``): one bridge per data directory.
    let lock: DataDirectoryLock
    let keys: BridgeKeys
    nonisolated(unsafe) let database: SQLiteDatabase
    let identities: PeerIdentityCache
    let moderationLog: ModerationLog
    let stores: BridgeStores
    /// The event ids an earlier run published and broadcast (a restart forwards nothing twice).
    let remembered: RememberedEvents
    let spamConfig: SpamFilterConfig
    let modlogConfig: ModerationLogConfig
    /// The console's denylist, kept across restarts (`denylist.json`).
    let denylist: Denylist
    let fleet: FleetSettings?
    var policyPath: String { FileIO.join(dataDirectory, "policy.json") }
    var denylistPath: String { FileIO.join(dataDirectory, "denylist.json") }
    var databasePath: String { FileIO.join(dataDirectory, "bridge.sqlite3") }

    static func open(_ config: BridgeConfiguration, logger: Logger) throws(CommandExit) -> RuntimeStores {
        let dataDirectory = Paths.dataDirectory(option: config.dataDirectory)
        try DataFiles.checkDataDirectory(dataDirectory)
        do {
            try FileIO.makeDirectory(dataDirectory, mode: 0o700)
        } catch {
            throw .failure("data directory: \(error)")
        }
        let lock = try DataDirectoryLock.acquire(dataDirectory: dataDirectory)
        let loaded = try DataFiles.loadKeys(KeyStore(dataDirectory: dataDirectory)) { logger.notice($0) }
        let keys = loaded.keys
        if loaded.created {
            // Said loudly (issue 35): a mistyped data directory made a new identity and started bridging without the
            // staff, the blocks or the held mail of the bridge the operator meant.
            logger.notice("new bridge identity: no keys.json was in the data directory, so this is a bridge the mesh has never met "
                + "(no staff, no blocks, no held mail); if this bridge has run before, stop it and check --data-dir, data_dir or BRIDGE_DATA_DIR", [
                ("data.dir", .string(dataDirectory)), ("mesh.peer", .string(Hex.encode(keys.peerID))),
            ])
        }
        let fleet = try fleetSettings(config, dataDirectory: dataDirectory)
        let spamConfig: SpamFilterConfig
        let modlogConfig: ModerationLogConfig
        do {
            spamConfig = try config.spam.map { try SpamFilterConfig(json: $0) } ?? SpamFilterConfig()
            modlogConfig = try config.modlog.map { try ModerationLogConfig(json: $0) } ?? ModerationLogConfig()
        } catch {
            throw .usage("configuration: \(error)")
        }
        let databasePath = FileIO.join(dataDirectory, "bridge.sqlite3")
        do {
            let database = try SQLiteDatabase(path: databasePath)
            let recent = try RecentEventStore(database: database)
            let identities = PeerIdentityCache(store: try SQLiteIdentityStore(database: database), logger: logger.child("identities"))
            let moderationLog = try ModerationLog(database: database, config: modlogConfig, logger: logger.child("modlog"))
            try ExportedBridgeName.store(config.nickname, in: database)
            var stores = BridgeStores(
                recent: recent, identities: identities, uplinks: try UplinkStore(database: database), moderationLog: moderationLog,
                externalChanges: database, syncJournal: try SQLiteSyncJournal(database: database),
                boardLedger: config.gateway ? try BoardNostrLedger(database: database) : nil,
                fleetList: fleet.map { _ in FleetListFile(dataDirectory: dataDirectory) })
            stores.held = try HeldMessageStore(database: database)
            if config.courier { stores.courier = try CourierStore(database: database) }
            if fleet?.siteKey != nil {
                stores.siteRecords = try SiteRecordStore(database: database)
                stores.siteAudit = try ConsoleAudit(database: database)
            }
            let limit = RecentEventStore.Limits.maxRows
            let remembered = RememberedEvents(
                published: try recent.load(.published, limit: limit).compactMap(EventID.init(bytes:)),
                rebroadcast: try recent.load(.rebroadcast, limit: limit).compactMap(EventID.init(bytes:)),
                learned: try recent.load(.learned, limit: limit).compactMap(EventID.init(bytes:)),
                radioCopies: try recent.load(.radioCopy, limit: limit).map { Hex.encode($0) })
            let opened = RuntimeStores(
                dataDirectory: dataDirectory, lock: lock, keys: keys, database: database, identities: identities, moderationLog: moderationLog,
                stores: stores, remembered: remembered, spamConfig: spamConfig, modlogConfig: modlogConfig,
                denylist: try loadDenylist(FileIO.join(dataDirectory, "denylist.json")), fleet: fleet)
            opened.loadPolicy(logger: logger)
            return opened
        } catch let exit as CommandExit {
            throw exit
        } catch {
            throw .failure("database \(databasePath): \(error)")
        }
    }

    /// The operator's policy file into the stranger cache; unreadable, retention passes wait (fail closed).
    private func loadPolicy(logger: Logger) {
        do {
            identities.setOperatorLists(try OperatorLists.load(path: policyPath))
        } catch {
            logger.error("policy file unreadable; retention passes are held", [("error", .string(error.description))])
        }
    }

    private static func loadDenylist(_ path: String) throws(CommandExit) -> Denylist {
        guard FileIO.exists(path) else { return .empty }
        do {
            return try Denylist(json: try JSONParser().parse(try FileIO.read(path, maxBytes: 1 << 20)))
        } catch {
            throw .usage("\(path): \(error)")
        }
    }

    /// Fleet moderation settings from `operator_keys` and `fleet_site`, with the operator secret key when the data
    /// dir holds one (``OperatorKeys/secretFileName``: 64 hex, mode 0600, its public key one of `operator_keys`).
    /// Nil when no operator key is configured. The secret is never logged.
    static func fleetSettings(_ config: BridgeConfiguration, dataDirectory: String) throws(CommandExit) -> FleetSettings? {
        guard !config.operatorKeys.isEmpty else { return nil }
        let path = FileIO.join(dataDirectory, OperatorKeys.secretFileName)
        var publisher: SchnorrSecretKey?
        if FileIO.exists(path) {
            let mode: UInt32
            let text: String
            do {
                mode = try FileIO.permissions(path)
                text = String(decoding: try FileIO.read(path, maxBytes: 256), as: UTF8.self)
            } catch {
                throw .failure("\(path): \(error)")
            }
            guard mode & 0o077 == 0 else {
                throw .usage("\(path) is readable by others (mode \(String(mode & 0o777, radix: 8))); chmod 600 it")
            }
            let hex = text.filter { !$0.isWhitespace }.lowercased()
            guard let bytes = try? Hex.decode(hex, expectedCount: 32), let key = try? SchnorrSecretKey(bytes: bytes) else {
                throw .usage("\(path) must hold a secret key as 64 hex characters")
            }
            guard config.operatorKeys.contains(key.publicKey) else {
                throw .usage("\(path): its public key \(key.publicKey.hex) is not one of operator_keys")
            }
            publisher = key
        }
        return FleetSettings(site: config.fleetSite, operators: Set(config.operatorKeys), publisher: publisher)
    }

    /// Folds the WAL into the database file and truncates it, so the file alone is complete and a copy or a
    /// backup taken after the stop needs nothing else; then closes the one connection. Runs after every service
    /// has stopped (nobody else uses the connection any more). Failure (disk full) is logged; SQLite's WAL keeps
    /// the data either way. Then the data directory's lock is given up: another bridge may start on it.
    func close(logger: Logger) {
        do {
            try database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        } catch {
            logger.error("database checkpoint at stop failed (the WAL keeps the data)", [("error", .string(error.description))])
        }
        database.close()
        lock.release()
    }
}
