public import BotCrypto
public import BotSupport
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

/// Why the key file could not be used. The bridge never replaces an unreadable key file with a new
/// identity: phones pin the old one, so silently changing it would look like an impersonation.
public enum KeyStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    case corrupt(path: String, reason: String)
    case tooOpen(path: String, mode: UInt32)
    case io(FileError)

    public var description: String {
        switch self {
        case .corrupt(let path, let reason):
            "key file \(path) is corrupt (\(reason)); restore it from a backup, or move it away to create a new identity"
        case .tooOpen(let path, let mode):
            "key file \(path) has mode \(String(mode, radix: 8)); it holds secrets and must be 600 (chmod 600 \(path))"
        case .io(let error): "key file: \(error)"
        }
    }
}

/// Loads or creates `keys.json` in the data directory (directory 0700, file 0600, written atomically).
///
/// File layout: `{"format":1,"nostr_seed":hex,"noise_static_private":hex,"noise_static_public":hex,
/// "ed25519_seed":hex,"ed25519_public":hex}`. The public halves are stored as check values: on load they
/// must match what the private halves derive, so a damaged secret is reported instead of becoming a new,
/// silently different identity.
public struct KeyStore: Sendable {
    public static let fileName = "keys.json"
    public static let fileFormat: Int64 = 1

    public let dataDirectory: String

    public init(dataDirectory: String) {
        self.dataDirectory = dataDirectory
    }

    public var path: String { FileIO.join(dataDirectory, Self.fileName) }

    /// The stored keys, or newly generated ones (written before they are returned) when there is no file.
    public func loadOrCreate(generate: () -> BridgeKeys = BridgeKeys.generate) throws(KeyStoreError)
        -> (keys: BridgeKeys, created: Bool)
    {
        if FileIO.exists(path) { return (try load(), false) }
        do {
            try FileIO.makeDirectory(dataDirectory, mode: 0o700)
        } catch {
            throw .io(error)
        }
        let keys = generate()
        do {
            try FileIO.writeAtomically(Array((JSONWriter.pretty(Self.encode(keys)) + "\n").utf8), to: path, mode: 0o600)
        } catch {
            throw .io(error)
        }
        return (keys, true)
    }

    /// Reads and checks an existing key file.
    public func load() throws(KeyStoreError) -> BridgeKeys {
        let bytes: [UInt8]
        let mode: UInt32
        do {
            mode = try FileIO.permissions(path)
            bytes = try FileIO.read(path, maxBytes: 64 << 10)
        } catch {
            throw .io(error)
        }
        guard mode & 0o077 == 0 else { throw .tooOpen(path: path, mode: mode) }
        return try Self.decode(bytes, path: path)
    }

    static func encode(_ keys: BridgeKeys) -> JSONValue {
        .object([
            ("format", .integer(fileFormat)),
            ("nostr_seed", .string(Hex.encode(keys.nostrSeed))),
            ("noise_static_private", .string(Hex.encode(keys.noiseKey.rawRepresentation))),
            ("noise_static_public", .string(Hex.encode(keys.noiseKey.publicKey))),
            ("ed25519_seed", .string(Hex.encode(keys.signingKey.seed))),
            ("ed25519_public", .string(Hex.encode(keys.signingKey.publicKey.rawRepresentation))),
        ])
    }

    static func decode(_ bytes: [UInt8], path: String) throws(KeyStoreError) -> BridgeKeys {
        let root: JSONValue
        do {
            root = try JSONParser().parse(bytes)
        } catch {
            throw .corrupt(path: path, reason: "not valid JSON")
        }
        guard root["format"]?.integerValue == fileFormat else {
            throw .corrupt(path: path, reason: "unknown or missing format")
        }
        func field(_ name: String) throws(KeyStoreError) -> [UInt8] {
            guard let text = root[name]?.stringValue, let bytes = try? Hex.decode(text, expectedCount: 32) else {
                throw .corrupt(path: path, reason: "field \(name) is missing or not 32 bytes of hex")
            }
            return bytes
        }
        let seed = try field("nostr_seed")
        let noisePrivate = try field("noise_static_private")
        let noisePublic = try field("noise_static_public")
        let edSeed = try field("ed25519_seed")
        let edPublic = try field("ed25519_public")
        guard let noise = try? X25519PrivateKey(rawRepresentation: noisePrivate), noise.publicKey == noisePublic else {
            throw .corrupt(path: path, reason: "Noise private key does not match its public key")
        }
        guard let signing = try? Ed25519PrivateKey(seed: edSeed), signing.publicKey.rawRepresentation == edPublic else {
            throw .corrupt(path: path, reason: "Ed25519 seed does not match its public key")
        }
        guard let keys = try? BridgeKeys(nostrSeed: seed, noiseKey: noise, signingKey: signing) else {
            throw .corrupt(path: path, reason: "invalid key material")
        }
        return keys
    }
}
