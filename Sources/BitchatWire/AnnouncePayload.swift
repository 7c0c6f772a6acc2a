/// Capability bits of announce TLV 0x05 (MESH-WIRE §4.7.3): a u64 written little-endian with trailing zero
/// bytes dropped (at least one byte). Unknown bits are kept.
public struct PeerCapabilities: OptionSet, Hashable, Sendable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public static let prekeys = PeerCapabilities(rawValue: 1 << 0)
    public static let wifiBulk = PeerCapabilities(rawValue: 1 << 1)
    /// Shares internet for geohash channels (accepts `toGateway` carriers).
    public static let gateway = PeerCapabilities(rawValue: 1 << 2)
    public static let groups = PeerCapabilities(rawValue: 1 << 3)
    public static let board = PeerCapabilities(rawValue: 1 << 4)
    public static let vouch = PeerCapabilities(rawValue: 1 << 5)
    public static let meshDiagnostics = PeerCapabilities(rawValue: 1 << 6)
    /// Mesh↔Nostr rendezvous bridge; advertised with TLV 0x06.
    public static let bridge = PeerCapabilities(rawValue: 1 << 7)
    public static let privateMedia = PeerCapabilities(rawValue: 1 << 8)
    public static let privateMediaReceipts = PeerCapabilities(rawValue: 1 << 9)
    public static let nonDestructiveNoiseReplacement = PeerCapabilities(rawValue: 1 << 10)

    /// Minimal little-endian bytes, at least one.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        var value = rawValue
        repeat {
            out.append(UInt8(truncatingIfNeeded: value))
            value >>= 8
        } while value != 0
        return out
    }

    /// Up to the first 8 bytes little-endian; extra bytes ignored; empty = no capabilities.
    public init(encoded bytes: some Collection<UInt8>) {
        var value: UInt64 = 0
        for (i, byte) in bytes.prefix(8).enumerated() { value |= UInt64(byte) << UInt64(8 * i) }
        rawValue = value
    }

    /// Every known bit with its iOS name.
    public static let namedBits: [(PeerCapabilities, String)] = [
        (.prekeys, "prekeys"), (.wifiBulk, "wifiBulk"), (.gateway, "gateway"), (.groups, "groups"),
        (.board, "board"), (.vouch, "vouch"), (.meshDiagnostics, "meshDiagnostics"), (.bridge, "bridge"),
        (.privateMedia, "privateMedia"), (.privateMediaReceipts, "privateMediaReceipts"),
        (.nonDestructiveNoiseReplacement, "nonDestructiveNoiseReplacement"),
    ]

    /// Names of the known bits that are set.
    public var names: [String] { Self.namedBits.filter { contains($0.0) }.map(\.1) }
}

/// The announce payload (type 0x01): TLVs with 1-byte type and 1-byte length (MESH-WIRE §4.7.2).
///
/// ```
/// 01 len nickname (UTF-8, required) | 02 20 noise X25519 public (required) | 03 20 Ed25519 public (required)
/// [04 len N×8 direct neighbours] | [05 len capabilities LE] | [06 len bridge geohash 1–12] | [unknown TLVs…]
/// ```
/// Encoding order is iOS's (01 02 03 04 05 06), then unknown TLVs verbatim.
public struct AnnouncePayload: Sendable, Equatable {
    public enum Limits {
        /// One-byte TLV length.
        public static let maxValueLength = 255
        /// X25519 and Ed25519 public keys are 32 raw bytes.
        public static let keyLength = 32
        /// The encoder caps the neighbour list at 10 (iOS).
        public static let maxNeighbors = 10
        /// TLV 0x06 holds a geohash of 1–12 characters; longer is omitted on encode and ignored on decode.
        public static let maxBridgeGeohashLength = 12
    }

    public enum TLV {
        public static let nickname: UInt8 = 0x01
        public static let noisePublicKey: UInt8 = 0x02
        public static let signingPublicKey: UInt8 = 0x03
        public static let directNeighbors: UInt8 = 0x04
        public static let capabilities: UInt8 = 0x05
        public static let bridgeGeohash: UInt8 = 0x06
    }

    public var nickname: String
    public var noisePublicKey: [UInt8]
    public var signingPublicKey: [UInt8]
    public var directNeighbors: [MeshPeerID]
    /// nil = TLV absent (legacy client); present-but-empty decodes as `[]`.
    public var capabilities: PeerCapabilities?
    public var bridgeGeohash: String?
    /// Unknown TLVs, kept in order and re-encoded verbatim.
    public var unknownTLVs: [UnknownTLV]

    public struct UnknownTLV: Sendable, Equatable {
        public var type: UInt8
        public var value: [UInt8]
        public init(type: UInt8, value: [UInt8]) {
            self.type = type
            self.value = value
        }
    }

    public init(
        nickname: String,
        noisePublicKey: [UInt8],
        signingPublicKey: [UInt8],
        directNeighbors: [MeshPeerID] = [],
        capabilities: PeerCapabilities? = nil,
        bridgeGeohash: String? = nil,
        unknownTLVs: [UnknownTLV] = []
    ) {
        self.nickname = nickname
        self.noisePublicKey = noisePublicKey
        self.signingPublicKey = signingPublicKey
        self.directNeighbors = directNeighbors
        self.capabilities = capabilities
        self.bridgeGeohash = bridgeGeohash
        self.unknownTLVs = unknownTLVs
    }

    public func encode() throws(WireError) -> [UInt8] {
        var out: [UInt8] = []
        func tlv(_ type: UInt8, _ value: [UInt8], _ field: WireError.Field) throws(WireError) {
            guard value.count <= Limits.maxValueLength else { throw .invalidLength(field: field, length: value.count) }
            out.append(type)
            out.append(UInt8(value.count))
            out += value
        }
        try tlv(TLV.nickname, Array(nickname.utf8), .nickname)
        try tlv(TLV.noisePublicKey, noisePublicKey, .noisePublicKey)
        try tlv(TLV.signingPublicKey, signingPublicKey, .signingPublicKey)
        if !directNeighbors.isEmpty {
            try tlv(TLV.directNeighbors, directNeighbors.prefix(Limits.maxNeighbors).flatMap(\.bytes), .payload)
        }
        if let capabilities { try tlv(TLV.capabilities, capabilities.encoded, .payload) }
        if let bridgeGeohash, (1...Limits.maxBridgeGeohashLength).contains(bridgeGeohash.utf8.count) {
            try tlv(TLV.bridgeGeohash, Array(bridgeGeohash.utf8), .geohash)
        }
        for unknown in unknownTLVs { try tlv(unknown.type, unknown.value, .payload) }
        return out
    }

    /// Decodes; a TLV running past the end rejects the whole announce, a trailing lone type byte is ignored.
    public static func decode(_ bytes: [UInt8]) throws(WireError) -> AnnouncePayload {
        var nickname: String?
        var noise: [UInt8]?
        var signing: [UInt8]?
        var neighbors: [MeshPeerID] = []
        var capabilities: PeerCapabilities?
        var geohash: String?
        var unknown: [UnknownTLV] = []
        var reader = ByteReader(bytes)
        while reader.remaining >= 2 {
            let (type, value) = try reader.tlv(lengthSize: { _ in 1 })
            switch type {
            case TLV.nickname:
                guard let text = decodeUTF8(value) else { throw .invalidUTF8(field: .nickname) }
                nickname = text
            case TLV.noisePublicKey:
                guard value.count == Limits.keyLength else { throw .invalidLength(field: .noisePublicKey, length: value.count) }
                noise = value
            case TLV.signingPublicKey:
                guard value.count == Limits.keyLength else {
                    throw .invalidLength(field: .signingPublicKey, length: value.count)
                }
                signing = value
            case TLV.directNeighbors:
                // iOS ignores an empty or non-multiple-of-8 list.
                if !value.isEmpty, value.count % 8 == 0 {
                    neighbors = stride(from: 0, to: value.count, by: 8).map { MeshPeerID(bytes: value[$0..<$0 + 8]) }
                } else {
                    neighbors = []
                }
            case TLV.capabilities:
                capabilities = PeerCapabilities(encoded: value)
            case TLV.bridgeGeohash:
                if (1...Limits.maxBridgeGeohashLength).contains(value.count), let text = decodeUTF8(value) {
                    geohash = text
                }
            default:
                unknown.append(UnknownTLV(type: type, value: value))
            }
        }
        guard let nickname else { throw .missingTLV(TLV.nickname) }
        guard let noise else { throw .missingTLV(TLV.noisePublicKey) }
        guard let signing else { throw .missingTLV(TLV.signingPublicKey) }
        return AnnouncePayload(
            nickname: nickname, noisePublicKey: noise, signingPublicKey: signing, directNeighbors: neighbors,
            capabilities: capabilities, bridgeGeohash: geohash, unknownTLVs: unknown
        )
    }
}
