public import BotStorage
public import BotSupport
public import BridgeCore
public import IdentityCache
public import ModerationLog
public import Moderation
public import MeshSync
public import MeshSyncStorage
public import Nostr

/// A failed store operation, as the coordinator reports it: what failed, and whether the disk is full (the
/// one failure an operator can fix without a restart, and the one that must never stop the bridging).
public protocol StoreFailure: Error, CustomStringConvertible {
    var isDiskFull: Bool { get }
}

extension SQLiteError: StoreFailure {}

extension ModerationLogError: StoreFailure {
    public var isDiskFull: Bool {
        if case .storage(let error) = self { return error.isDiskFull }
        return false
    }
}

extension IdentityStoreError: StoreFailure {
    public var isDiskFull: Bool {
        if case .sqlite(let error) = self { return error.isDiskFull }
        return false
    }
}

/// Event ids the bridge published or broadcast (``RecentEventStore``): written before the forward.
public protocol RecentEventRecording: AnyObject {
    func record(_ id: [UInt8], as role: RememberedRole) throws(SQLiteError)
    /// Many at once, in one transaction.
    func record(_ ids: [[UInt8]], as role: RememberedRole) throws(SQLiteError)
}

/// Uplinks no relay has acknowledged yet (``UplinkStore``).
public protocol PendingUplinkStoring: AnyObject {
    var counters: UplinkStore.Counters { get }
    func count() throws(SQLiteError) -> Int
    @discardableResult func save(_ event: NostrEvent) throws(SQLiteError) -> Int
    @discardableResult func remove(_ id: EventID) throws(SQLiteError) -> Bool
    func pending(now: Int64) throws(SQLiteError) -> [NostrEvent]
}

/// Where hidden messages are recorded (``ModerationLog``).
public protocol ModerationRecording: AnyObject {
    @discardableResult func append(_ record: ModerationRecord) throws(ModerationLogError) -> Int64
    @discardableResult func prune(now: Double) throws(ModerationLogError) -> Int
    func count() throws(ModerationLogError) -> Int
    @discardableResult func markReleased(messageID: String, at: Double, by: String) throws(ModerationLogError) -> Int
}

extension RecentEventStore: RecentEventRecording {}
extension UplinkStore: PendingUplinkStoring {}
extension ModerationLog: ModerationRecording {}

/// The sync stores' durable table (`SQLiteSyncJournal` in the bridge): read once at start, then every change the
/// core's ``SyncStores`` report is written through. A failed write is counted, never thrown (the core keeps
/// serving from memory).
public protocol SyncJournaling: AnyObject {
    func restore(now: UInt64) throws(SQLiteError) -> SyncStores
    func write(_ changes: [SyncStoreChange])
    var failedWrites: Int { get }
}

/// postID → event id of the bridge's Nostr copy of a board post (`BoardNostrLedger` in the bridge), so a
/// tombstone that comes after a restart still deletes the copy (BOARD.md §11 "Ours"). The core holds the rows
/// in memory (``BoardLedger``); this is where they are kept.
public protocol BoardNostrLedgering: AnyObject {
    func entries(now: UInt64) throws(SQLiteError) -> [BoardLedger.Entry]
    func record(_ entry: BoardLedger.Entry, now: UInt64) throws(SQLiteError)
    @discardableResult func forget(postID: [UInt8]) throws(SQLiteError) -> Bool
}

extension SQLiteSyncJournal: SyncJournaling {}

extension BoardNostrLedger: BoardNostrLedgering {
    public func entries(now: UInt64) throws(SQLiteError) -> [BoardLedger.Entry] {
        try all(now: now).map { BoardLedger.Entry(postID: $0.postID, eventID: $0.eventID, expiresAt: $0.expiresAt) }
    }

    public func record(_ entry: BoardLedger.Entry, now: UInt64) throws(SQLiteError) {
        try record(postID: entry.postID, eventID: entry.eventID, expiresAt: entry.expiresAt, now: now)
    }
}

/// The console's audit as the store service writes other stages' actions into it (the Console module implements it:
/// it depends on this one).
public protocol SiteAuditing: AnyObject {
    func record(_ record: SiteRecord) throws(SQLiteError)
}

/// Where the last good fleet list is kept across restarts, as its signed event (``FleetListFile`` in the bridge,
/// ``InMemoryFleetList`` in in-process tests): loaded once at start and offered like one from a relay.
public protocol FleetListKeeping: AnyObject {
    /// The kept event, verified; nil when there is none.
    func load() throws(FleetListFileError) -> NostrEvent?
    func save(_ event: NostrEvent) throws(FileError)
}

/// A kept fleet list in memory (in-process tests; a bridge without a data dir).
public final class InMemoryFleetList: FleetListKeeping {
    public private(set) var event: NostrEvent?

    public init(_ event: NostrEvent? = nil) { self.event = event }

    public func load() throws(FleetListFileError) -> NostrEvent? { event }
    public func save(_ event: NostrEvent) throws(FileError) { self.event = event }
}

/// Tells whether another process changed the database since the last look (SQLite's `data_version`: it moves
/// only for commits made through *other* connections, never for our own writes). The CLI's edits arrive as a
/// notification on the control socket; this is the backstop its minutely upkeep consults.
public protocol ExternalChangeProbe: AnyObject {
    /// A value that differs from the previous one when another connection committed since.
    func changeToken() throws(SQLiteError) -> Int64
}

extension SQLiteDatabase: ExternalChangeProbe {
    public func changeToken() throws(SQLiteError) -> Int64 {
        try prepare("PRAGMA data_version").query { $0.int64(0) }.first ?? 0
    }
}

/// The stores the coordinator reads at start and writes as the core decides, behind protocols so the
/// coordinator runs in-process with in-memory doubles in tests, and over one SQLite connection
/// (`bridge.sqlite3`) and the data dir's files in the bridge: the coordinator itself opens no file.
///
/// `@unchecked Sendable`: the stores are not thread-safe; they are handed to one ``BridgeCoordinator``, which
/// is their only user while it runs (its actor serialises every call). The bridge's runtime touches the
/// connection again only after the coordinator has finished (the stop's checkpoint).
public struct BridgeStores: @unchecked Sendable {
    public var recent: any RecentEventRecording
    public var identities: PeerIdentityCache
    public var uplinks: (any PendingUplinkStoring)?
    public var moderationLog: (any ModerationRecording)?
    public var externalChanges: (any ExternalChangeProbe)?
    /// Gossip sync and board stores (issue 17; ``SQLiteSyncJournal`` in the bridge): nil = kept in memory only.
    public var syncJournal: (any SyncJournaling)?
    /// The board's Nostr copies (BOARD.md §11): nil = kept in memory only.
    public var boardLedger: (any BoardNostrLedgering)?
    /// The kept fleet list (with fleet moderation on): nil = not kept, a restart waits for the relays.
    public var fleetList: (any FleetListKeeping)?
    /// Hidden messages kept for a release across a restart: nil = this run's memory only.
    public var held: HeldMessageStore?
    /// The courier gateway's mail and taken drops (issue 24): nil = this run's memory only.
    public var courier: CourierStore?
    /// The site's records (issue 35): nil = this run's memory only (a restart catches up from the relays, and what
    /// no relay acknowledged is lost).
    public var siteRecords: SiteRecordStore?
    /// Where another stage's moderation actions become rows of this stage's audit (the console's table): nil = none.
    public var siteAudit: (any SiteAuditing)?

    public init(
        recent: any RecentEventRecording, identities: PeerIdentityCache, uplinks: (any PendingUplinkStoring)? = nil,
        moderationLog: (any ModerationRecording)? = nil, externalChanges: (any ExternalChangeProbe)? = nil,
        syncJournal: (any SyncJournaling)? = nil, boardLedger: (any BoardNostrLedgering)? = nil,
        fleetList: (any FleetListKeeping)? = nil
    ) {
        self.recent = recent
        self.identities = identities
        self.uplinks = uplinks
        self.moderationLog = moderationLog
        self.externalChanges = externalChanges
        self.syncJournal = syncJournal
        self.boardLedger = boardLedger
        self.fleetList = fleetList
    }
}
