/// The REQUEST_SYNC payload (type 0x21), MESH-WIRE §8.1: TLVs with 1-byte type and 2-byte big-endian length.
///
/// ```
/// 01 0001 P (u8, 1…32) | 02 0004 M (u32 > 0) | 03 len GCS data (≤ 1024) |
/// [04 len sync types, 1–8 bytes LE] | [05 0008 since ms] | [06 len fragment-ID filter, "hex16,hex16,…"] | other: ignored
/// ```
/// Decode only: a public bridge may ignore sync requests (§8.4) but must parse them without trapping.
public struct RequestSyncPayload: Sendable, Equatable {
    public enum Limits {
        /// The iOS decoder's Golomb-Rice parameter range.
        public static let pRange: ClosedRange<UInt8> = 1...32
        /// Larger GCS data rejects the whole request.
        public static let maxDataLength = 1024
        /// A fragment-ID filter TLV above this is ignored.
        public static let maxFragmentFilterLength = 1024
        /// At most this many fragment IDs are kept from the filter.
        public static let maxFragmentIDs = 60
        /// Sync-type bits 0…10 are defined (announce … groupMessage); unknown bits are dropped on decode.
        public static let knownTypeBits: UInt64 = 0x7FF
    }

    public var p: UInt8
    public var m: UInt32
    public var data: [UInt8]
    /// Sync-type bits (bit 0 announce, 1 message, …); nil = absent (announce + message).
    public var types: UInt64?
    public var sinceTimestamp: UInt64?
    public var fragmentIDs: [UInt64]

    public init(p: UInt8, m: UInt32, data: [UInt8], types: UInt64? = nil, sinceTimestamp: UInt64? = nil, fragmentIDs: [UInt64] = []) {
        self.p = p
        self.m = m
        self.data = data
        self.types = types
        self.sinceTimestamp = sinceTimestamp
        self.fragmentIDs = fragmentIDs
    }

    public func encode() -> [UInt8] {
        var out: [UInt8] = []
        func tlv(_ type: UInt8, _ value: [UInt8]) {
            out.append(type)
            out.appendBigEndian(UInt64(value.count), size: 2)
            out += value
        }
        tlv(0x01, [p])
        var mBytes: [UInt8] = []
        mBytes.appendBigEndian(UInt64(m), size: 4)
        tlv(0x02, mBytes)
        tlv(0x03, data)
        if let types { tlv(0x04, PeerCapabilities(rawValue: types).encoded) }
        if let sinceTimestamp {
            var since: [UInt8] = []
            since.appendBigEndian(sinceTimestamp, size: 8)
            tlv(0x05, since)
        }
        if !fragmentIDs.isEmpty {
            tlv(0x06, Array(fragmentIDs.prefix(Limits.maxFragmentIDs).map { MeshPeerID(rawValue: $0).hex }.joined(separator: ",").utf8))
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
        while !reader.isAtEnd {
            let (type, value) = try reader.tlv(lengthSize: { _ in 2 })
            switch type {
            case 0x01:
                guard value.count == 1 else { throw .invalidLength(field: .syncP, length: value.count) }
                guard Limits.pRange.contains(value[0]) else { throw .invalidValue(field: .syncP, value: Int(value[0])) }
                p = value[0]
            case 0x02:
                guard value.count == 4 else { throw .invalidLength(field: .syncM, length: value.count) }
                let parsed = value.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                guard parsed > 0 else { throw .invalidValue(field: .syncM, value: 0) }
                m = parsed
            case 0x03:
                guard value.count <= Limits.maxDataLength else { throw .invalidLength(field: .syncData, length: value.count) }
                data = value
            case 0x04:
                guard (1...8).contains(value.count) else { throw .invalidLength(field: .syncTypes, length: value.count) }
                types = PeerCapabilities(encoded: value).rawValue & Limits.knownTypeBits
            case 0x05:
                guard value.count == 8 else { throw .invalidLength(field: .syncSince, length: value.count) }
                since = value.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
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
        return RequestSyncPayload(p: p, m: m, data: data, types: types, sinceTimestamp: since, fragmentIDs: fragmentIDs)
    }

    /// Comma-separated 16-hex IDs; malformed tokens dropped; at most 60 kept.
    static func parseFragmentFilter(_ text: String) -> [UInt64] {
        var ids: [UInt64] = []
        for token in text.split(separator: ",", omittingEmptySubsequences: true) where ids.count < Limits.maxFragmentIDs {
            guard token.utf8.count == 16, let id = try? MeshPeerID(hex: String(token)) else { continue }
            ids.append(id.rawValue)
        }
        return ids
    }
}

/// Golomb-Coded Set of REQUEST_SYNC (MESH-WIRE §8.2): sorted mapped values in [1, M), as deltas written as
/// q = (x − 1) >> P one-bits, a zero bit, then the low P bits of x − 1, MSB first.
public enum GCSFilter {
    /// The values in `data`; empty when P ∉ 1…32 or M ≤ 1 (iOS: "holds nothing"). Stops at the end of the
    /// data or when the running value reaches M. Bounded by the data size (≤ 1 024 bytes in a request).
    public static func decode(p: Int, m: UInt64, data: [UInt8]) -> [UInt64] {
        guard (1...32).contains(p), m > 1 else { return [] }
        var bit = 0
        let totalBits = data.count * 8
        func next() -> Int? {
            guard bit < totalBits else { return nil }
            defer { bit += 1 }
            return Int(data[bit >> 3] >> (7 - UInt8(bit & 7)) & 1)
        }
        var values: [UInt64] = []
        var running: UInt64 = 0
        while true {
            var q: UInt64 = 0
            var sawZero = false
            while let b = next() {
                if b == 0 {
                    sawZero = true
                    break
                }
                q += 1
            }
            guard sawZero, bit + p <= totalBits else { break }
            var r: UInt64 = 0
            for _ in 0..<p { r = r << 1 | UInt64(next() ?? 0) }
            let (shifted, overflow) = q.multipliedReportingOverflow(by: 1 << UInt64(p))
            guard !overflow else { break }
            let (sum, overflow2) = running.addingReportingOverflow(shifted | r &+ 1)
            guard !overflow2, sum < m else { break }
            running = sum
            values.append(running)
        }
        return values
    }

    /// Encodes sorted, distinct values in [1, M) (the inverse of ``decode(p:m:data:)``).
    public static func encode(p: Int, values: [UInt64]) -> [UInt8] {
        var out: [UInt8] = []
        var bitCount = 0
        func put(_ b: Int) {
            if bitCount % 8 == 0 { out.append(0) }
            if b != 0 { out[out.count - 1] |= 0x80 >> UInt8(bitCount % 8) }
            bitCount += 1
        }
        var previous: UInt64 = 0
        for value in values.sorted() where value > previous {
            let x = value - previous - 1
            for _ in 0..<(x >> UInt64(p)) { put(1) }
            put(0)
            for i in (0..<p).reversed() { put(Int(x >> UInt64(i) & 1)) }
            previous = value
        }
        return out
    }
}
