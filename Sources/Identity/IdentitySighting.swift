/// A verified sighting, what the stranger cache records: a mesh announce whose signature checked out, or a
/// Nostr event with a valid signature.
public struct IdentitySighting: Sendable {
    public let key: IdentityKey
    public let pins: MeshPins?
    public let peerID: UInt64?
    public let nickname: String?

    /// A verified mesh announce.
    public static func mesh(
        noiseKey: [UInt8], signingKey: [UInt8], peerID: UInt64, nickname: String?
    ) throws(IdentityKeyError) -> IdentitySighting {
        IdentitySighting(
            key: try .mesh(noiseKey: noiseKey), pins: try MeshPins(noiseKey: noiseKey, signingKey: signingKey),
            peerID: peerID, nickname: nickname)
    }

    /// A verified Nostr event (`nickname` from its `n` tag, if any).
    public static func nostr(pubkey: [UInt8], nickname: String?) throws(IdentityKeyError) -> IdentitySighting {
        IdentitySighting(key: try .nostr(pubkey: pubkey), pins: nil, peerID: nil, nickname: nickname)
    }
}

