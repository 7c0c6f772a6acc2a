/// The Nostr carrier payload (type 0x28), MESH-WIRE §9.1 / NOSTR-GEO §8.8: TLVs with 1-byte type and
/// 2-byte big-endian length.
///
/// ```
/// 01 0001 direction (1 toGateway, 2 fromGateway, 3 toBridge, 4 fromBridge)
/// 02 len  geohash, UTF-8 base32, 1–12 bytes
/// 03 len  event JSON (complete signed Nostr event), 1–16 384 bytes
/// other TLVs skipped; all three required; a truncated TLV or trailing byte rejects the packet.
/// ```
/// The event JSON is kept as bytes: this module does not interpret Nostr events.
public struct NostrCarrierPayload: Sendable, Equatable {
    public enum Limits {
        /// iOS carrier cap on the embedded event JSON.
        public static let maxEventJSONLength = 16_384
        /// Geohash precision 12 is the longest cell.
        public static let maxGeohashLength = 12
    }

    public enum Direction: UInt8, Sendable, CaseIterable {
        case toGateway = 1, fromGateway = 2, toBridge = 3, fromBridge = 4

        public var name: String {
            switch self {
            case .toGateway: "toGateway"
            case .fromGateway: "fromGateway"
            case .toBridge: "toBridge"
            case .fromBridge: "fromBridge"
            }
        }

        public init?(name: String) {
            guard let match = Self.allCases.first(where: { $0.name == name }) else { return nil }
            self = match
        }

        /// Uplinks (to a gateway/bridge) ride directed, signed packets; downlinks broadcasts (iOS sends them unsigned;
        /// this bridge signs them too, as Android PR #770 would require).
        public var isUplink: Bool { self == .toGateway || self == .toBridge }
    }

    public var direction: Direction
    public var geohash: String
    public var eventJSON: [UInt8]

    public init(direction: Direction, geohash: String, eventJSON: [UInt8]) {
        self.direction = direction
        self.geohash = geohash
        self.eventJSON = eventJSON
    }

    public func encode() throws(WireError) -> [UInt8] {
        try Self.validate(geohash: Array(geohash.utf8))
        guard (1...Limits.maxEventJSONLength).contains(eventJSON.count) else {
            throw .invalidLength(field: .eventJSON, length: eventJSON.count)
        }
        var out: [UInt8] = []
        out.reserveCapacity(9 + geohash.utf8.count + eventJSON.count)  // three TLV headers + values: one allocation
        out.appendTLV16(0x01, [direction.rawValue])
        out.appendTLV16(0x02, Array(geohash.utf8))
        out.appendTLV16(0x03, eventJSON)
        return out
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> NostrCarrierPayload {
        var direction: Direction?
        var geohash: String?
        var event: [UInt8]?
        var reader = ByteReader(bytes)
        while !reader.isAtEnd {
            guard reader.remaining >= 3 else { throw .trailingBytes(reader.remaining) }
            let (type, value) = try reader.tlv(lengthSize: { _ in 2 })
            switch type {
            case 0x01:
                guard value.count == 1 else { throw .invalidLength(field: .direction, length: value.count) }
                guard let parsed = Direction(rawValue: value[0]) else {
                    throw .invalidValue(field: .direction, value: Int(value[0]))
                }
                direction = parsed
            case 0x02:
                try validate(geohash: value)
                geohash = String(decoding: value, as: UTF8.self)
            case 0x03:
                guard (1...Limits.maxEventJSONLength).contains(value.count) else {
                    throw .invalidLength(field: .eventJSON, length: value.count)
                }
                guard decodeUTF8(value) != nil else { throw .invalidUTF8(field: .eventJSON) }
                event = value
            default:
                continue
            }
        }
        guard let direction else { throw .missingTLV(0x01) }
        guard let geohash else { throw .missingTLV(0x02) }
        guard let event else { throw .missingTLV(0x03) }
        return NostrCarrierPayload(direction: direction, geohash: geohash, eventJSON: event)
    }

    private static let base32: Set<UInt8> = Set("0123456789bcdefghjkmnpqrstuvwxyz".utf8)

    private static func validate(geohash value: [UInt8]) throws(WireError) {
        guard (1...Limits.maxGeohashLength).contains(value.count) else {
            throw .invalidLength(field: .geohash, length: value.count)
        }
        for byte in value where !base32.contains(byte) { throw .invalidValue(field: .geohash, value: Int(byte)) }
    }
}
