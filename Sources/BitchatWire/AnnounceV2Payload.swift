public import BotCrypto

/// AnnounceV2 (type 0x2C), MESH-WIRE §4.7.7: defined for rotating peer IDs, parsed and ignored by iOS, emitted
/// by nobody. TLVs with 1-byte type and length:
///
/// ```
/// 01 04 epoch u32 (required) | 02 40 tag block, 8 × 8 bytes (required) | 03 len capabilities, canonical minimal
/// | 04 len bridge geohash ≤ 12 | other: skipped
/// ```
public struct AnnounceV2Payload: Sendable, Equatable {
    public enum Limits {
        /// Eight 8-byte recognition tags.
        public static let tagBlockLength = 64
        public static let maxGeohashLength = 12
    }

    public var epoch: UInt32
    public var tagBlock: [UInt8]
    public var capabilities: PeerCapabilities?
    public var bridgeGeohash: String?

    public init(epoch: UInt32, tagBlock: [UInt8], capabilities: PeerCapabilities? = nil, bridgeGeohash: String? = nil) {
        self.epoch = epoch
        self.tagBlock = tagBlock
        self.capabilities = capabilities
        self.bridgeGeohash = bridgeGeohash
    }

    public func encode() throws(WireError) -> [UInt8] {
        guard tagBlock.count == Limits.tagBlockLength else { throw .invalidLength(field: .payload, length: tagBlock.count) }
        var out: [UInt8] = [0x01, 0x04]
        out.appendBigEndian(UInt64(epoch), size: 4)
        out += [0x02, UInt8(Limits.tagBlockLength)] + tagBlock
        if let capabilities {
            let bytes = capabilities.encoded
            out += [0x03, UInt8(bytes.count)] + bytes
        }
        if let bridgeGeohash {
            let bytes = Array(bridgeGeohash.utf8)
            guard (1...Limits.maxGeohashLength).contains(bytes.count) else { throw .invalidLength(field: .geohash, length: bytes.count) }
            out += [0x04, UInt8(bytes.count)] + bytes
        }
        return out
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> AnnounceV2Payload {
        var epoch: UInt32?
        var tags: [UInt8]?
        var capabilities: PeerCapabilities?
        var geohash: String?
        var reader = ByteReader(bytes)
        while !reader.isAtEnd {
            let (type, value) = try reader.tlv(lengthSize: { _ in 1 })
            switch type {
            case 0x01:
                guard value.count == 4 else { throw .invalidLength(field: .payload, length: value.count) }
                epoch = UInt32(value.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
            case 0x02:
                guard value.count == Limits.tagBlockLength else { throw .invalidLength(field: .payload, length: value.count) }
                tags = value
            case 0x03:
                // Canonical minimal: non-empty, ≤ 8 bytes, and no trailing zero byte unless it is the only byte.
                guard !value.isEmpty, value.count <= 8, value.count == 1 || value.last != 0 else {
                    throw .invalidLength(field: .payload, length: value.count)
                }
                capabilities = PeerCapabilities(encoded: value)
            case 0x04:
                guard (1...Limits.maxGeohashLength).contains(value.count), let text = decodeUTF8(value) else {
                    throw .invalidLength(field: .geohash, length: value.count)
                }
                geohash = text
            default:
                continue
            }
        }
        guard let epoch else { throw .missingTLV(0x01) }
        guard let tags else { throw .missingTLV(0x02) }
        return AnnounceV2Payload(epoch: epoch, tagBlock: tags, capabilities: capabilities, bridgeGeohash: geohash)
    }
}

/// Peer-ID rotation derivations (MESH-WIRE §4.7.7; not live in the apps, pinned by iOS tests).
public enum PeerIDRotation {
    /// Rotation epochs are hours since the Unix epoch.
    public static func epoch(unixSeconds: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: unixSeconds / 3_600) }

    /// HKDF-SHA256(ikm = Noise private key, salt = ∅, info = "bitchat-peer-rotation-v1", 32 bytes).
    public static func rotationSecret(noisePrivateKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        try HKDFSHA256.deriveKey(inputKeyMaterial: noisePrivateKey, salt: [], info: Array("bitchat-peer-rotation-v1".utf8), outputByteCount: 32)
    }

    /// HMAC-SHA256(secret, "bitchat-peer-id-v2" ‖ u32 epoch)[0..8].
    public static func rotatingID(secret: [UInt8], epoch: UInt32) -> MeshPeerID {
        var message = Array("bitchat-peer-id-v2".utf8)
        message.appendBigEndian(UInt64(epoch), size: 4)
        return MeshPeerID(bytes: HMACSHA256.authenticationCode(key: secret, message: message).prefix(8))
    }

    /// HMAC(HKDF(shared, info "bitchat-recognition-v1"), u32 epoch ‖ sender pub ‖ recipient pub ‖ peer ID)[0..8].
    public static func recognitionTag(
        sharedSecret: [UInt8], epoch: UInt32, senderPublicKey: [UInt8], recipientPublicKey: [UInt8], peerID: MeshPeerID
    ) throws(CryptoError) -> [UInt8] {
        let key = try HKDFSHA256.deriveKey(
            inputKeyMaterial: sharedSecret, salt: [], info: Array("bitchat-recognition-v1".utf8), outputByteCount: 32
        )
        var message: [UInt8] = []
        message.appendBigEndian(UInt64(epoch), size: 4)
        message += senderPublicKey + recipientPublicKey + peerID.bytes
        return Array(HMACSHA256.authenticationCode(key: key, message: message).prefix(8))
    }
}
