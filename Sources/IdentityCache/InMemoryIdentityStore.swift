public import Identity
import BotSupport

/// An ``IdentityStore`` in process memory: for tests, and for a bridge run without a data directory.
/// Transactions are real: a failing body leaves the store exactly as before.
public final class InMemoryIdentityStore: IdentityStore {
    private var rows: [IdentityKey: IdentityRecord] = [:]
    private var byPeerID: [UInt64: IdentityKey] = [:]
    private var byNickname: [String: Set<IdentityKey>] = [:]
    private var transactionDepth = 0

    public init() {}

    public func record(_ key: IdentityKey) throws(IdentityStoreError) -> IdentityRecord? { rows[key] }

    public func signingKey(peerID: UInt64) throws(IdentityStoreError) -> [UInt8]? {
        byPeerID[peerID].flatMap { rows[$0]?.pins?.signingKey }
    }

    public func keys(nickname: String, limit: Int) throws(IdentityStoreError) -> [IdentityKey] {
        Array((byNickname[nickname] ?? []).sorted().prefix(max(0, limit)))
    }

    public func keys(hexPrefix: String, kind: IdentityKind, limit: Int) throws(IdentityStoreError) -> [IdentityKey] {
        Array(rows.keys.filter { $0.kind == kind && Hex.encode($0.bytes).hasPrefix(hexPrefix) }.sorted().prefix(max(0, limit)))
    }

    public func put(_ record: IdentityRecord) throws(IdentityStoreError) {
        removeIndexes(of: record.key)
        if let peerID = record.peerID, let holder = byPeerID[peerID], holder != record.key {
            // The other record keeps its key pins but loses the mapping.
            rows[holder]?.peerID = nil
            byPeerID[peerID] = nil
        }
        rows[record.key] = record
        if let peerID = record.peerID { byPeerID[peerID] = record.key }
        if let nickname = record.nickname { byNickname[nickname, default: []].insert(record.key) }
    }

    private func removeIndexes(of key: IdentityKey) {
        guard let old = rows[key] else { return }
        if let peerID = old.peerID, byPeerID[peerID] == key { byPeerID[peerID] = nil }
        if let nickname = old.nickname {
            byNickname[nickname]?.remove(key)
            if byNickname[nickname]?.isEmpty == true { byNickname[nickname] = nil }
        }
    }

    public func setLastSeen(_ day: UTCDay?, keys: [IdentityKey]) throws(IdentityStoreError) {
        for key in keys where rows[key] != nil { rows[key]?.lastSeen = day }
    }

    @discardableResult
    public func delete(_ keys: [IdentityKey]) throws(IdentityStoreError) -> Int {
        var removed = 0
        for key in keys where rows[key] != nil {
            removeIndexes(of: key)
            rows[key] = nil
            removed += 1
        }
        return removed
    }

    public func count() throws(IdentityStoreError) -> Int { rows.count }

    public func strangerCount() throws(IdentityStoreError) -> Int { rows.values.lazy.filter(\.isStranger).count }

    public func strangerRows(stampedAtOrBefore: UTCDay?) throws(IdentityStoreError) -> [RetentionRow] {
        rows.values.filter { record in
            guard record.isStranger else { return false }
            guard let cutoff = stampedAtOrBefore else { return true }
            return record.lastSeen.map { $0 <= cutoff } ?? false
        }.map { RetentionRow(key: $0.key, lastSeen: $0.lastSeen, firstSeen: $0.firstSeen) }.sorted { $0.key < $1.key }
    }

    public func unstampedStrangerKeys() throws(IdentityStoreError) -> [IdentityKey] {
        rows.values.filter { $0.isStranger && $0.lastSeen == nil }.map(\.key).sorted()
    }

    public func records(_ filter: IdentityListFilter, limit: Int, after: IdentityKey?) throws(IdentityStoreError) -> [IdentityRecord] {
        let matching = rows.values.filter { record in
            if let after, !(after < record.key) { return false }
            switch filter {
            case .all: return true
            case .strangers: return record.isStranger
            case .annotated: return !record.isStranger
            }
        }
        return Array(matching.sorted { $0.key < $1.key }.prefix(max(0, limit)))
    }

    public func transaction<T>(_ body: () throws(IdentityStoreError) -> T) throws(IdentityStoreError) -> T {
        if transactionDepth > 0 { return try body() }
        let saved = (rows, byPeerID, byNickname)
        transactionDepth += 1
        defer { transactionDepth -= 1 }
        do {
            return try body()
        } catch {
            (rows, byPeerID, byNickname) = saved
            throw error
        }
    }
}
