public import BotCrypto
import Nostr

/// The bridge's long-term key material, all generated on first use and kept in the data directory:
/// - a 32-byte Nostr seed from which every per-channel key is derived (as phones do, NOSTR-GEO §2.1);
/// - the X25519 Noise static key, whose SHA-256 gives the mesh peer ID and fingerprint (MESH-WIRE §3.2);
/// - the Ed25519 key that signs announces and public mesh messages.
public struct BridgeKeys: Sendable {
    public let nostrSeed: [UInt8]
    public let noiseKey: X25519PrivateKey
    public let signingKey: Ed25519PrivateKey

    public init(nostrSeed: [UInt8], noiseKey: X25519PrivateKey, signingKey: Ed25519PrivateKey) throws(CryptoError) {
        guard nostrSeed.count == 32 else {
            throw .invalidLength(what: "Nostr seed", expected: 32, actual: nostrSeed.count)
        }
        self.nostrSeed = nostrSeed
        self.noiseKey = noiseKey
        self.signingKey = signingKey
    }

    /// Fresh random key material.
    public static func generate() -> BridgeKeys {
        // Lengths are right by construction.
        try! BridgeKeys(nostrSeed: SecureRandom.bytes(32), noiseKey: .generate(), signingKey: .generate())
    }

    /// Full SHA-256 of the Noise static public key: the identity phones show as the fingerprint.
    public var fingerprint: [UInt8] { SHA256.hash(noiseKey.publicKey) }

    /// The 8-byte mesh peer ID: the first 8 bytes of the fingerprint.
    public var peerID: [UInt8] { Array(fingerprint.prefix(8)) }

    /// The Nostr key phones would derive for a geohash channel.
    public func channelKey(geohash: String) throws(CryptoError) -> SchnorrSecretKey {
        try NostrKeyDerivation.secretKey(seed: nostrSeed, label: NostrKeyDerivation.channelLabel(geohash: geohash))
    }

    /// The Nostr key for the mesh-bridge rendezvous of a 6-character cell.
    public func rendezvousKey(cell: String) throws(CryptoError) -> SchnorrSecretKey {
        try NostrKeyDerivation.secretKey(seed: nostrSeed, label: NostrKeyDerivation.rendezvousLabel(cell: cell))
    }
}
