public import BotStorage
public import BotSupport
public import IdentityCache
public import ModerationLog
public import Nostr
public import MeshSync
public import Moderation

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

/// Event ids the bridge published or broadcast (``RecentEventStore``): written before the forward.
public protocol RecentEventRecording: AnyObject {
    func record(_ id: [UInt8], as role: RecentEventStore.Role) throws(SQLiteError)
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
}

extension RecentEventStore: RecentEventRecording {}
extension UplinkStore: PendingUplinkStoring {}
extension ModerationLog: ModerationRecording {}

/// postID → event id of the bridge's Nostr copy of a board post (`BoardNostrLedger` in the bridge), so a
/// tombstone that comes after a restart still deletes the copy (BOARD.md §11 "Ours").
public protocol BoardNostrLedgering: AnyObject {
    func record(postID: [UInt8], eventID: [UInt8], expiresAt: UInt64, now: UInt64) throws(SQLiteError)
    func eventID(forPost postID: [UInt8], now: UInt64) throws(SQLiteError) -> [UInt8]?
    @discardableResult func forget(postID: [UInt8]) throws(SQLiteError) -> Bool
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

/// Tells whether another process changed the database since the last look (SQLite's `data_version`: it
/// moves only for commits made through *other* connections — `identities block` from the CLI — never for
/// our own writes), so the coordinator reloads the block list only when it may have changed.
public protocol ExternalChangeProbe: AnyObject {
    /// A value that differs from the previous one when another connection committed since.
    func changeToken() throws(SQLiteError) -> Int64
}

extension SQLiteDatabase: ExternalChangeProbe {
    public func changeToken() throws(SQLiteError) -> Int64 {
        try prepare("PRAGMA data_version").query { $0.int64(0) }.first ?? 0
    }
}

/// The stores the coordinator writes, behind protocols so the coordinator runs in-process with in-memory
/// doubles in tests, and over one SQLite connection (`bridge.sqlite3`) and the data dir's files in the bridge:
/// the coordinator itself opens no file.
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
    /// Gossip sync and board stores (issue 17; `SQLiteSyncStore` in the bridge): nil = sync requests and
    /// rounds from the mesh engine are not served.
    public var sync: (any GossipPacketStore & BoardPacketStore)?
    /// The board's Nostr copies (BOARD.md §11): nil = accepted geohash posts are not published to Nostr.
    public var boardLedger: (any BoardNostrLedgering)?
    /// The kept fleet list (with fleet moderation on): nil = not kept, a restart waits for the relays.
    public var fleetList: (any FleetListKeeping)?

    public init(
        recent: any RecentEventRecording, identities: PeerIdentityCache, uplinks: (any PendingUplinkStoring)? = nil,
        moderationLog: (any ModerationRecording)? = nil, externalChanges: (any ExternalChangeProbe)? = nil,
        sync: (any GossipPacketStore & BoardPacketStore)? = nil, boardLedger: (any BoardNostrLedgering)? = nil,
        fleetList: (any FleetListKeeping)? = nil
    ) {
        self.fleetList = fleetList
        self.sync = sync
        self.boardLedger = boardLedger
        self.recent = recent
        self.identities = identities
        self.uplinks = uplinks
        self.moderationLog = moderationLog
        self.externalChanges = externalChanges
    }
}
