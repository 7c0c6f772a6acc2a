public import BotCrypto
import BotSupport

/// Per-label Nostr identities derived from one 32-byte seed, exactly as bitchat phones derive them
/// (NOSTR-GEO §2.1), so the bridge has a stable, unlinkable key per channel.
///
/// For counter i = 0…9: candidate = HMAC-SHA256(key: seed, message: UTF-8(label) ‖ UInt32-BE(i)); the first
/// candidate that is a valid secp256k1 secret wins. If all ten fail (never seen in practice) the key is
/// SHA-256(seed ‖ UTF-8(label)). iOS writes the counter big-endian and Android little-endian; both agree at
/// i = 0, which succeeds with overwhelming probability.
public enum NostrKeyDerivation {
    public enum Limits {
        /// Candidates tried before the SHA-256 fallback (the phones' loop bound).
        public static let maxCounter: UInt32 = 10
    }

    /// The secret key for `label` under `seed`.
    public static func secretKey(seed: [UInt8], label: String) throws(CryptoError) -> SchnorrSecretKey {
        guard seed.count == 32 else { throw .invalidLength(what: "Nostr seed", expected: 32, actual: seed.count) }
        let labelBytes = Array(label.utf8)
        for counter in 0..<Limits.maxCounter {
            let message =
                labelBytes + [
                    UInt8(counter >> 24 & 0xff), UInt8(counter >> 16 & 0xff), UInt8(counter >> 8 & 0xff),
                    UInt8(counter & 0xff),
                ]
            let candidate = HMACSHA256.authenticationCode(key: seed, message: message)
            if SchnorrSecretKey.isValid(candidate) { return try SchnorrSecretKey(bytes: candidate) }
        }
        return try SchnorrSecretKey(bytes: SHA256.hash(seed + labelBytes))
    }

    /// The label of a geohash channel identity: the lowercase geohash itself.
    public static func channelLabel(geohash: String) -> String { geohash }

    /// The label of the mesh-bridge rendezvous identity for a 6-character cell (iOS: `bridge|<cell>`).
    public static func rendezvousLabel(cell: String) -> String { "bridge|" + cell }

    /// Our own label for the opt-in text mirror: one key per mesh author and channel, so phones can rate
    /// limit and block mesh authors separately. Not defined by the apps; the `mesh|` prefix keeps it
    /// disjoint from every phone label.
    public static func mirrorAuthorLabel(fingerprint: String, geohash: String) -> String {
        "mesh|" + fingerprint + "|" + geohash
    }
}

/// NIP-19 bech32 forms of keys.
public enum NIP19 {
    /// `npub1…` for an x-only public key.
    public static func npub(_ key: XOnlyPublicKey) -> String { Bech32.encode(hrp: "npub", data: key.bytes) }

    /// Parses `npub1…` into an x-only public key.
    public static func publicKey(npub: String) throws -> XOnlyPublicKey {
        try XOnlyPublicKey(bytes: Bech32.decodeKey(npub, hrp: "npub"))
    }
}
