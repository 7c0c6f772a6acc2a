/// The REQUEST_SYNC payload (type 0x21), MESH-WIRE §8.1 as corrected by BOARD.md §9.1: TLVs with 1-byte type
/// and 2-byte big-endian length.
///
/// ```
/// 01 0001 P (u8, 1…32) | 02 0004 M (u32 > 0) | 03 len GCS data (≤ 1024) |
/// [04 len sync types, 1–8 bytes LE] | [05 0008 since ms] | [06 len fragment-ID filter, "hex16,hex16,…"] | other: ignored
/// ```
///
/// The decoder is iOS `RequestSyncPacket.decode` (BOARD.md §9.1): a P, M, types or since TLV of the wrong
/// length is ignored (so a missing P or M is ``WireError/missingTLV(_:)``); GCS data over 1 024 bytes rejects
/// the whole request; a fragment filter over 1 024 bytes or not UTF-8 is ignored; unknown TLVs are skipped;
/// 1–2 trailing bytes are ignored; finally 1 ≤ P ≤ 32 and M > 0 are required.
public struct RequestSyncPayload: Sendable, Equatable {
    public enum Limits {
        /// The iOS decoder's Golomb-Rice parameter range (`GCSFilter.maxP` = 32).
        public static let pRange: ClosedRange<UInt8> = 1...32
        /// Larger GCS data rejects the whole request (iOS `maxAcceptBytes`).
        public static let maxDataLength = 1024
        /// A fragment-ID filter TLV above this is ignored (same cap as the data).
        public static let maxFragmentFilterLength = 1024
        /// Only the first this many comma-separated tokens of the filter are looked at (iOS
        /// `maxFragmentIdFilterCount`; 60 × 17 − 1 = 1 019 bytes fits the cap).
        public static let maxFragmentIDs = 60
        /// Sync-type bits 0…10 are defined (announce … groupMessage); unknown bits are dropped on decode.
        public static let knownTypeBits: UInt64 = SyncTypes.known.rawValue
        /// A types TLV is 1…8 bytes; another length is ignored (iOS `SyncTypeFlags.decode` returns nil).
        public static let typesLengthRange: ClosedRange<Int> = 1...8
    }

    public var p: UInt8
    public var m: UInt32
    public var data: [UInt8]
    /// Sync-type bits (bit 0 announce, 1 message, …); nil = absent (announce + message).
    public var types: UInt64?
    public var sinceTimestamp: UInt64?
    /// The valid fragment stream IDs of TLV 0x06 (empty = absent, as iOS treats a filter with none).
    public var fragmentIDs: [UInt64]

    public init(p: UInt8, m: UInt32, data: [UInt8], types: UInt64? = nil, sinceTimestamp: UInt64? = nil, fragmentIDs: [UInt64] = []) {
        self.p = p
        self.m = m
        self.data = data
        self.types = types
        self.sinceTimestamp = sinceTimestamp
        self.fragmentIDs = fragmentIDs
    }

    /// What the request asks for: TLV 0x04, or announce + message when it is absent (BOARD.md §9.4).
    public var requestedTypes: SyncTypes { types.map { SyncTypes(rawValue: $0) } ?? .publicMessages }

    public func encode() -> [UInt8] {
        var out: [UInt8] = []
        out.appendTLV16(0x01, [p])
        var mBytes: [UInt8] = []
        mBytes.appendBigEndian(UInt64(m), size: 4)
        out.appendTLV16(0x02, mBytes)
        out.appendTLV16(0x03, data)
        // iOS writes TLV 0x04 whenever the set is non-empty (`SyncTypeFlags.toData` is nil for 0).
        if let types, types != 0 { out.appendTLV16(0x04, PeerCapabilities(rawValue: types).encoded) }
        if let sinceTimestamp {
            var since: [UInt8] = []
            since.appendBigEndian(sinceTimestamp, size: 8)
            out.appendTLV16(0x05, since)
        }
        if !fragmentIDs.isEmpty {
            out.appendTLV16(0x06, Array(fragmentIDs.prefix(Limits.maxFragmentIDs).map { MeshPeerID(rawValue: $0).hex }.joined(separator: ",").utf8))
        }
        return out
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> RequestSyncPayload {
        var p: UInt8?
        var m: UInt32?
        var data: [UInt8]?
        var types: UInt64?
        var since: UInt64?
        var fragmentIDs: [UInt64] = []
        var reader = ByteReader(bytes)
        // iOS loops while ≥ 3 bytes remain: 1–2 trailing bytes are ignored.
        while reader.remaining >= 3 {
            let (type, value) = try reader.tlv(lengthSize: { _ in 2 })
            switch type {
            case 0x01:
                if value.count == 1 { p = value[0] }
            case 0x02:
                if value.count == 4 { m = value.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
            case 0x03:
                guard value.count <= Limits.maxDataLength else { throw .invalidLength(field: .syncData, length: value.count) }
                data = value
            case 0x04:
                if Limits.typesLengthRange.contains(value.count) {
                    types = PeerCapabilities(encoded: value).rawValue & Limits.knownTypeBits
                }
            case 0x05:
                if value.count == 8 { since = value.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
            case 0x06:
                if value.count <= Limits.maxFragmentFilterLength, let text = decodeUTF8(value) {
                    fragmentIDs = parseFragmentFilter(text)
                }
            default:
                continue
            }
        }
        guard let p else { throw .missingTLV(0x01) }
        guard let m else { throw .missingTLV(0x02) }
        guard let data else { throw .missingTLV(0x03) }
        guard Limits.pRange.contains(p) else { throw .invalidValue(field: .syncP, value: Int(p)) }
        guard m > 0 else { throw .invalidValue(field: .syncM, value: 0) }
        return RequestSyncPayload(p: p, m: m, data: data, types: types, sinceTimestamp: since, fragmentIDs: fragmentIDs)
    }

    /// iOS `decodeFragmentIdFilter`: the first 60 comma-separated (non-empty) tokens; each must be 16 hex
    /// characters, others dropped; duplicates kept once.
    static func parseFragmentFilter(_ text: String) -> [UInt64] {
        var ids: [UInt64] = []
        for token in text.split(separator: ",").prefix(Limits.maxFragmentIDs) {
            guard token.count == 16, let id = try? MeshPeerID(hex: String(token)) else { continue }
            if !ids.contains(id.rawValue) { ids.append(id.rawValue) }
        }
        return ids
    }
}

/// The sync-type bitfield of TLV 0x04 (iOS `SyncTypeFlags`, MESH-WIRE §8.1): bit i ↔ one message type.
/// Courier envelopes, pings, carriers, voice and AnnounceV2 have no bit and never sync.
public struct SyncTypes: OptionSet, Hashable, Sendable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public static let announce = SyncTypes(rawValue: 1 << 0)
    public static let message = SyncTypes(rawValue: 1 << 1)
    public static let leave = SyncTypes(rawValue: 1 << 2)
    public static let noiseHandshake = SyncTypes(rawValue: 1 << 3)
    public static let noiseEncrypted = SyncTypes(rawValue: 1 << 4)
    public static let fragment = SyncTypes(rawValue: 1 << 5)
    public static let requestSync = SyncTypes(rawValue: 1 << 6)
    public static let fileTransfer = SyncTypes(rawValue: 1 << 7)
    public static let board = SyncTypes(rawValue: 1 << 8)
    public static let prekeyBundle = SyncTypes(rawValue: 1 << 9)
    public static let groupMessage = SyncTypes(rawValue: 1 << 10)

    /// Every defined bit.
    public static let known = SyncTypes(rawValue: 0x7FF)
    /// What an absent TLV 0x04 means: announce + message (`03`).
    public static let publicMessages: SyncTypes = [.announce, .message]
    /// iOS's initial union 1 s after a new direct peer: `a3 07` (BOARD.md §8, S3).
    public static let iOSInitialUnion: SyncTypes = [.announce, .message, .fragment, .fileTransfer, .groupMessage, .prekeyBundle, .board]

    /// The bit for a packet type, or nil for types that never sync.
    public init?(type: MessageType) {
        let bits: [UInt8: Int] = [0x01: 0, 0x02: 1, 0x03: 2, 0x10: 3, 0x11: 4, 0x20: 5, 0x21: 6, 0x22: 7, 0x23: 8, 0x24: 9, 0x25: 10]
        guard let bit = bits[type.rawValue] else { return nil }
        self.init(rawValue: 1 << UInt64(bit))
    }

    /// Whether `type` has a bit and it is set.
    public func contains(type: MessageType) -> Bool {
        guard let bit = SyncTypes(type: type) else { return false }
        return contains(bit)
    }

    /// The TLV 0x04 value: little-endian, trailing zero bytes trimmed (nil for the empty set, which iOS never writes).
    public var encoded: [UInt8]? { rawValue == 0 ? nil : PeerCapabilities(rawValue: rawValue).encoded }
}
