import BotSupport
import IdentityCache

#if canImport(Glibc)
import Glibc
#endif

/// Discards log records (the cache logs every pass).
struct NullSink: LogSink {
    func emit(_ record: LogRecord) {}
}

let quietLogger = Logger(label: "test", level: .error, sink: NullSink())

/// The two store implementations every conformance and retention test runs against.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case inMemory
    case sqlite

    var testDescription: String { rawValue }

    func make() throws -> any IdentityStore {
        switch self {
        case .inMemory: InMemoryIdentityStore()
        case .sqlite: try SQLiteIdentityStore(path: ":memory:")
        }
    }
}

/// Deterministic 32 bytes from an index and a salt (distinct for distinct inputs).
func bytes32(_ index: Int, salt: UInt8) -> [UInt8] {
    var out = [UInt8](repeating: salt, count: 32)
    var n = UInt64(index)
    for i in 0..<8 {
        out[31 - i] = UInt8(truncatingIfNeeded: n)
        n >>= 8
    }
    return out
}

func nostrSighting(_ index: Int, nickname: String? = nil) throws -> PeerIdentityCache.Sighting {
    try .nostr(pubkey: bytes32(index, salt: 0x4e), nickname: nickname ?? "n\(index)")
}

func nostrKey(_ index: Int) throws -> IdentityKey { try .nostr(pubkey: bytes32(index, salt: 0x4e)) }

func meshSighting(_ index: Int, signingSalt: UInt8 = 0x53, nickname: String? = nil) throws -> PeerIdentityCache.Sighting {
    let noise = bytes32(index, salt: 0x4d)
    return try .mesh(
        noiseKey: noise, signingKey: bytes32(index, salt: signingSalt), peerID: UInt64(0x1000_0000 + index),
        nickname: nickname ?? "m\(index)")
}

func meshKey(_ index: Int) throws -> IdentityKey { try .mesh(noiseKey: bytes32(index, salt: 0x4d)) }

func day(_ n: Int) -> UTCDay { UTCDay(20_000 + n) }

func at(_ n: Int, ms: Int64 = 43_200_000) -> UTCTime { UTCTime(day: day(n), plusMilliseconds: ms) }

/// A cache with a readable empty policy, over a fresh store of `kind`.
func makeCache(_ kind: StoreKind, lists: OperatorLists? = .empty) throws -> (PeerIdentityCache, any IdentityStore) {
    let store = try kind.make()
    let cache = PeerIdentityCache(store: store, logger: quietLogger)
    cache.setOperatorLists(lists)
    return (cache, store)
}

/// A fresh temporary directory (removed by the caller with `removeTree`).
func temporaryDirectory() -> String {
    var template = Array("/tmp/identity-tests-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer -> String in
        guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return "/tmp" }
        return String(cString: result)
    }
    return path
}

func removeTree(_ path: String) {
    guard path.hasPrefix("/tmp/identity-tests-") else { return }
    for name in ["bridge.sqlite3", "bridge.sqlite3-wal", "bridge.sqlite3-shm", "policy.json", "ready"] {
        unlink(path + "/" + name)
    }
    rmdir(path)
}

/// Wraps a store and counts the calls that scan strangers, to prove the cap trigger is an O(1) check.
final class CountingStore: IdentityStore {
    let inner: any IdentityStore
    var scans = 0

    init(_ inner: any IdentityStore) { self.inner = inner }

    func record(_ key: IdentityKey) throws(IdentityStoreError) -> IdentityRecord? { try inner.record(key) }
    func signingKey(peerID: UInt64) throws(IdentityStoreError) -> [UInt8]? { try inner.signingKey(peerID: peerID) }
    func keys(nickname: String, limit: Int) throws(IdentityStoreError) -> [IdentityKey] { try inner.keys(nickname: nickname, limit: limit) }
    func keys(hexPrefix: String, kind: IdentityKind, limit: Int) throws(IdentityStoreError) -> [IdentityKey] {
        try inner.keys(hexPrefix: hexPrefix, kind: kind, limit: limit)
    }
    func put(_ record: IdentityRecord) throws(IdentityStoreError) { try inner.put(record) }
    func setLastSeen(_ day: UTCDay?, keys: [IdentityKey]) throws(IdentityStoreError) { try inner.setLastSeen(day, keys: keys) }
    func delete(_ keys: [IdentityKey]) throws(IdentityStoreError) -> Int { try inner.delete(keys) }
    func count() throws(IdentityStoreError) -> Int {
        scans += 1
        return try inner.count()
    }
    func strangerCount() throws(IdentityStoreError) -> Int {
        scans += 1
        return try inner.strangerCount()
    }
    func strangerRows(stampedAtOrBefore: UTCDay?) throws(IdentityStoreError) -> [RetentionRow] {
        scans += 1
        return try inner.strangerRows(stampedAtOrBefore: stampedAtOrBefore)
    }
    func unstampedStrangerKeys() throws(IdentityStoreError) -> [IdentityKey] {
        scans += 1
        return try inner.unstampedStrangerKeys()
    }
    func records(_ filter: IdentityListFilter, limit: Int, after: IdentityKey?) throws(IdentityStoreError) -> [IdentityRecord] {
        try inner.records(filter, limit: limit, after: after)
    }
    func transaction<T>(_ body: () throws(IdentityStoreError) -> T) throws(IdentityStoreError) -> T { try inner.transaction(body) }
}

import Testing
import Identity
