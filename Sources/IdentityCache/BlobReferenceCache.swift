import BotStorage
import BotSupport
public import Identity

/// The seed's design, kept as the benchmark's baseline (and tested so the comparison is honest): the whole cache
/// lives in memory, is encoded as one JSON blob (the phone's `JSONEncoder` of its identity cache) and is rewritten
/// on every real write; launch decodes the whole blob before the first lookup. The blob sits in one row of a SQLite
/// database opened with the same settings as ``SQLiteIdentityStore`` (standing in for the phone's keychain item),
/// so the two designs pay the same durability cost per commit.
///
/// Retention follows ``RetentionRules`` exactly; only the storage differs.
public final class BlobReferenceCache {
    public enum DecodeError: Error, Equatable, Sendable {
        case json(String)
        case field(String)
    }

    private let database: SQLiteDatabase
    private let writeBlob: SQLiteStatement
    public private(set) var records: [IdentityKey: IdentityRecord] = [:]
    private var byPeerID: [UInt64: IdentityKey] = [:]
    /// Bytes of the last blob written or read.
    public private(set) var blobBytes = 0
    private var lastPassDay: UTCDay?

    /// Opens the database at `path` and decodes the whole blob (the launch cost being measured).
    public init(path: String) throws {
        database = try SQLiteDatabase(path: path)
        try database.execute("CREATE TABLE IF NOT EXISTS blob_reference(id INTEGER PRIMARY KEY CHECK (id = 1), data BLOB NOT NULL)")
        writeBlob = try database.prepare("INSERT OR REPLACE INTO blob_reference(id, data) VALUES(1, ?)")
        let stored = try database.prepare("SELECT data FROM blob_reference WHERE id = 1").query { $0.blob(0) }
        if let blob = stored.first {
            blobBytes = blob.count
            try decode(blob)
        }
    }

    /// Replaces the whole cache and writes it once (benchmark setup).
    public func replaceAll(_ all: [IdentityRecord]) throws {
        records = Dictionary(all.map { ($0.key, $0) }, uniquingKeysWith: { $1 })
        byPeerID = [:]
        for record in all { if let peerID = record.peerID { byPeerID[peerID] = record.key } }
        try persist()
    }

    public func signingKey(peerID: UInt64) -> [UInt8]? {
        byPeerID[peerID].flatMap { records[$0]?.pins?.signingKey }
    }

    /// The same sighting rules as ``PeerIdentityCache`` (row annotations protect); rewrites the blob when
    /// anything changed. Returns true when it wrote.
    @discardableResult
    public func recordSighting(_ sighting: PeerIdentityCache.Sighting, now: UTCTime) throws -> Bool {
        let existing = records[sighting.key]
        if let pinned = existing?.pins, let offered = sighting.pins, pinned.signingKey != offered.signingKey { return false }
        var updated = existing ?? IdentityRecord(key: sighting.key)
        if updated.pins == nil { updated.pins = sighting.pins }
        if let peerID = sighting.peerID { updated.peerID = peerID }
        if let nickname = sighting.nickname { updated.nickname = nickname }
        if updated.firstSeen == nil { updated.firstSeen = now }
        if !updated.isStranger {
            updated.lastSeen = nil
        } else if RetentionRules.shouldRefresh(stamp: updated.lastSeen, today: now.day) {
            updated.lastSeen = now.day
        }
        guard updated != existing else { return false }
        records[sighting.key] = updated
        if let peerID = updated.peerID { byPeerID[peerID] = sighting.key }
        try persist()
        return true
    }

    /// A retention pass on the in-memory cache, then one blob rewrite if anything changed. Returns evictions.
    @discardableResult
    public func runPass(today: UTCDay, announcer: IdentityKey?) throws -> Int {
        var changed = false
        for (key, record) in records where record.isStranger && record.lastSeen == nil {
            records[key]?.lastSeen = today
            changed = true
        }
        var evicted: [IdentityKey] = []
        if let cutoff = RetentionRules.forgetCutoff(today: today, previousPass: lastPassDay) {
            evicted += records.values.filter { $0.isStranger && $0.key != announcer && ($0.lastSeen.map { $0 <= cutoff } ?? false) }.map(\.key)
            for key in evicted { remove(key) }
        }
        let strangers = records.values.filter(\.isStranger).map { RetentionRow(key: $0.key, lastSeen: $0.lastSeen, firstSeen: $0.firstSeen) }
        let capped = RetentionRules.capEvictions(strangers: strangers, today: today, announcer: announcer)
        for key in capped { remove(key) }
        evicted += capped
        lastPassDay = today
        if changed || !evicted.isEmpty { try persist() }
        return evicted.count
    }

    private func remove(_ key: IdentityKey) {
        if let peerID = records[key]?.peerID, byPeerID[peerID] == key { byPeerID[peerID] = nil }
        records[key] = nil
    }

    private func persist() throws {
        let blob = Array(JSONWriter.compact(.array(records.values.map(Self.encode))).utf8)
        blobBytes = blob.count
        try writeBlob.run([.blob(blob)])
    }

    private static func encode(_ record: IdentityRecord) -> JSONValue {
        var fields: [(String, JSONValue)] = [("kind", .integer(Int64(record.key.kind.rawValue))), ("key", .string(record.key.hex))]
        if let pins = record.pins {
            fields.append(("noiseKey", .string(Hex.encode(pins.noiseKey))))
            fields.append(("signingKey", .string(Hex.encode(pins.signingKey))))
        }
        if let peerID = record.peerID { fields.append(("peerID", .string(Hex.encode(MeshPins.peerIDBytes(peerID))))) }
        if let nickname = record.nickname { fields.append(("nickname", .string(nickname))) }
        if let firstSeen = record.firstSeen { fields.append(("firstSeen", .integer(firstSeen.millisecondsSince1970))) }
        if let lastSeen = record.lastSeen { fields.append(("lastSeen", .integer(Int64(lastSeen.number)))) }
        let a = record.annotations
        fields += [
            ("favorite", .bool(a.allowed)), ("verified", .bool(a.verified)), ("blocked", .bool(a.blocked)),
            ("trust", .integer(Int64(a.trust.rawValue))),
        ]
        if let petname = a.petname { fields.append(("petname", .string(petname))) }
        if let notes = a.notes { fields.append(("notes", .string(notes))) }
        return .object(fields)
    }

    private func decode(_ blob: [UInt8]) throws {
        let value: JSONValue
        do {
            value = try JSONParser(limits: .init(maxBytes: 512 << 20, maxDepth: 8)).parse(blob)
        } catch {
            throw DecodeError.json("\(error)")
        }
        guard let items = value.arrayValue else { throw DecodeError.field("root") }
        records.reserveCapacity(items.count)
        for item in items {
            guard let kindValue = item["kind"]?.integerValue, let kind = IdentityKind(rawValue: Int(kindValue)),
                let keyHex = item["key"]?.stringValue
            else { throw DecodeError.field("key") }
            let key = try IdentityKey(kind: kind, bytes: Hex.decode(keyHex, expectedCount: 32))
            var record = IdentityRecord(key: key)
            if let noise = item["noiseKey"]?.stringValue, let signing = item["signingKey"]?.stringValue {
                record.pins = try MeshPins(noiseKey: Hex.decode(noise, expectedCount: 32), signingKey: Hex.decode(signing, expectedCount: 32))
            }
            if let peer = item["peerID"]?.stringValue { record.peerID = try MeshPins.peerID(Hex.decode(peer, expectedCount: 8)) }
            record.nickname = item["nickname"]?.stringValue
            record.firstSeen = item["firstSeen"]?.integerValue.map { UTCTime(millisecondsSince1970: $0) }
            record.lastSeen = item["lastSeen"]?.integerValue.map { UTCDay(Int($0)) }
            record.annotations = Annotations(
                allowed: item["favorite"]?.boolValue ?? false, verified: item["verified"]?.boolValue ?? false,
                blocked: item["blocked"]?.boolValue ?? false,
                trust: TrustLevel(rawValue: Int(item["trust"]?.integerValue ?? 0)) ?? .unknown,
                petname: item["petname"]?.stringValue, notes: item["notes"]?.stringValue)
            records[key] = record
            if let peerID = record.peerID { byPeerID[peerID] = key }
        }
    }
}
