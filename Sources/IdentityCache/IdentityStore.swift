public import BotStorage
public import Identity

/// Why a store operation failed. Closed: callers switch over it.
public enum IdentityStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// SQLite failed (the code tells a full disk, `SQLITE_FULL`, from I/O or corruption).
    case sqlite(SQLiteError)
    /// The database was written by a newer bitchat-bridge; opening it could lose data, so we refuse.
    case schemaTooNew(found: Int, known: Int)
    /// A stored row cannot be decoded (wrong key length, unknown kind…); names the column.
    case corruptRow(String)

    public var description: String {
        switch self {
        case .sqlite(let error): error.description
        case .schemaTooNew(let found, let known):
            "identity tables are at schema version \(found), this build knows \(known): upgrade bitchat-bridge"
        case .corruptRow(let reason): "corrupt identity row: \(reason)"
        }
    }
}

/// Which identities a listing returns.
public enum IdentityListFilter: Sendable {
    case all
    /// Rows without any annotation (the operator's policy file may still protect some of them).
    case strangers
    /// Rows carrying at least one relationship.
    case annotated
}

/// Durable storage of identity records: one row per identity, with indexed lookups so that nothing on a hot path
/// decodes the whole cache. Not thread-safe: one owner (the bridge's actor, or one CLI invocation) calls it.
///
/// Every implementation must pass `IdentityStoreConformance` (the shared test suite).
public protocol IdentityStore: AnyObject {
    /// The record for `key`, or nil.
    func record(_ key: IdentityKey) throws(IdentityStoreError) -> IdentityRecord?
    /// Hot path (every carried packet): the pinned Ed25519 signing key for a mesh peer ID, or nil.
    func signingKey(peerID: UInt64) throws(IdentityStoreError) -> [UInt8]?
    /// Keys whose claimed nickname is exactly `nickname`, at most `limit`, in key order.
    func keys(nickname: String, limit: Int) throws(IdentityStoreError) -> [IdentityKey]
    /// Keys of `kind` whose lowercase hex starts with `hexPrefix` (1–64 lowercase hex characters), at most `limit`,
    /// in key order: the operator types the prefix a table shows (an indexed range, not a scan).
    func keys(hexPrefix: String, kind: IdentityKind, limit: Int) throws(IdentityStoreError) -> [IdentityKey]
    /// Inserts or replaces the whole row. A peer ID held by another row is taken from it (the newest verified
    /// announce owns the mapping), so a peer ID maps to at most one identity.
    func put(_ record: IdentityRecord) throws(IdentityStoreError)
    /// Sets the retention stamp of existing rows (missing keys are ignored).
    func setLastSeen(_ day: UTCDay?, keys: [IdentityKey]) throws(IdentityStoreError)
    /// Deletes rows with their pins, peer-ID mapping and nickname-index entry; returns how many existed.
    @discardableResult
    func delete(_ keys: [IdentityKey]) throws(IdentityStoreError) -> Int
    /// Number of rows.
    func count() throws(IdentityStoreError) -> Int
    /// Number of rows without annotations.
    func strangerCount() throws(IdentityStoreError) -> Int
    /// Rows without annotations, reduced to what retention needs; with `stampedAtOrBefore`, only stamped rows
    /// whose stamp is at most that day (an indexed range, not a scan). In no particular order.
    func strangerRows(stampedAtOrBefore: UTCDay?) throws(IdentityStoreError) -> [RetentionRow]
    /// Keys of rows without annotations and without a stamp.
    func unstampedStrangerKeys() throws(IdentityStoreError) -> [IdentityKey]
    /// A page of records in key order, for the operator's listing.
    func records(_ filter: IdentityListFilter, limit: Int, after: IdentityKey?) throws(IdentityStoreError) -> [IdentityRecord]
    /// Runs `body` atomically: all its writes land, or none. Nested calls join the outer transaction.
    func transaction<T>(_ body: () throws(IdentityStoreError) -> T) throws(IdentityStoreError) -> T
}
