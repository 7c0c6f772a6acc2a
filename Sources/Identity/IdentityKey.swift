import BotSupport
import BotCrypto

/// Which network an identity comes from.
public enum IdentityKind: Int, Sendable, Hashable, CaseIterable {
    /// A bitchat mesh peer, keyed by the fingerprint of its Noise static key.
    case mesh = 0
    /// A Nostr author, keyed by its x-only secp256k1 public key.
    case nostr = 1

    public var name: String { self == .mesh ? "mesh" : "nostr" }
}

/// Why text or bytes are not an identity key.
public enum IdentityKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    case wrongLength(expected: Int, got: Int)
    case notHex(String)
    case unknownPrefix(String)
    case badNpub(String)

    public var description: String {
        switch self {
        case .wrongLength(let expected, let got): "expected \(expected) bytes, got \(got)"
        case .notHex(let text): "'\(text)' is not 64 lowercase or uppercase hex characters"
        case .unknownPrefix(let prefix): "unknown key prefix '\(prefix)' (use mesh:, nostr: or npub1…)"
        case .badNpub(let reason): "not a valid npub: \(reason)"
        }
    }
}

/// The cache key of one identity: mesh fingerprint (SHA-256 of the 32-byte Noise static public key) or
/// Nostr x-only public key. Both are 32 bytes; the kind keeps the two namespaces apart.
///
/// Prints redacted (`mesh:0123abcd…`); ``hex`` gives the full lowercase hex for the CLI and JSON edge.
public struct IdentityKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    public enum Limits {
        /// SHA-256 output and x-only secp256k1 public keys are both 32 bytes.
        public static let keyBytes = 32
    }

    public let kind: IdentityKind
    public let bytes: [UInt8]

    public init(kind: IdentityKind, bytes: [UInt8]) throws(IdentityKeyError) {
        guard bytes.count == Limits.keyBytes else {
            throw .wrongLength(expected: Limits.keyBytes, got: bytes.count)
        }
        self.kind = kind
        self.bytes = bytes
    }

    /// The mesh key of a peer: lowercase-hex SHA-256 of its 32-byte Noise static public key.
    public static func mesh(noiseKey: [UInt8]) throws(IdentityKeyError) -> IdentityKey {
        guard noiseKey.count == MeshPins.Limits.noiseKeyBytes else {
            throw .wrongLength(expected: MeshPins.Limits.noiseKeyBytes, got: noiseKey.count)
        }
        return try IdentityKey(kind: .mesh, bytes: SHA256.hash(noiseKey))
    }

    /// The Nostr key of an author (32-byte x-only public key).
    public static func nostr(pubkey: [UInt8]) throws(IdentityKeyError) -> IdentityKey {
        try IdentityKey(kind: .nostr, bytes: pubkey)
    }

    /// Full lowercase hex of the key bytes.
    public var hex: String { Hex.encode(bytes) }

    /// `mesh:<64 hex>` or `nostr:<64 hex>`: unambiguous text form used by the CLI and JSON.
    public var qualified: String { "\(kind.name):\(hex)" }

    public var description: String { "\(kind.name):\(Hex.encode(bytes.prefix(4)))…" }

    public static func < (a: IdentityKey, b: IdentityKey) -> Bool {
        a.kind.rawValue != b.kind.rawValue ? a.kind.rawValue < b.kind.rawValue : a.bytes.lexicographicallyPrecedes(b.bytes)
    }

    /// Parses `mesh:<hex>` or `nostr:<hex>`. Bare hex and npub are resolved by the caller
    /// (bare hex is ambiguous between the two kinds; npub needs the Nostr module's bech32).
    public init(qualified text: String) throws(IdentityKeyError) {
        guard let colon = text.firstIndex(of: ":") else { throw .unknownPrefix("") }
        let prefix = String(text[..<colon])
        let body = text[text.index(after: colon)...]
        let kind: IdentityKind
        switch prefix {
        case "mesh": kind = .mesh
        case "nostr": kind = .nostr
        default: throw .unknownPrefix(prefix)
        }
        let bytes: [UInt8]
        do {
            bytes = try Hex.decode(body.lowercased(), expectedCount: Limits.keyBytes)
        } catch {
            throw .notHex(String(body))
        }
        try self.init(kind: kind, bytes: bytes)
    }
}

/// What a verified mesh announce pins for a peer: the keys that let the bridge verify its carried messages.
/// The peer ID that maps to these pins is ``IdentityRecord/peerID``.
public struct MeshPins: Equatable, Sendable {
    public enum Limits {
        /// Curve25519 public keys are 32 bytes (MESH-WIRE §3.2).
        public static let noiseKeyBytes = 32
        /// Ed25519 public keys are 32 bytes.
        public static let signingKeyBytes = 32
    }

    /// The peer's Noise static (X25519) public key.
    public let noiseKey: [UInt8]
    /// The peer's Ed25519 signing public key: the pin that verifies carried public messages.
    public let signingKey: [UInt8]
    public init(noiseKey: [UInt8], signingKey: [UInt8]) throws(IdentityKeyError) {
        guard noiseKey.count == Limits.noiseKeyBytes else {
            throw .wrongLength(expected: Limits.noiseKeyBytes, got: noiseKey.count)
        }
        guard signingKey.count == Limits.signingKeyBytes else {
            throw .wrongLength(expected: Limits.signingKeyBytes, got: signingKey.count)
        }
        self.noiseKey = noiseKey
        self.signingKey = signingKey
    }

    /// Reads an 8-byte wire peer ID big-endian.
    public static func peerID(_ bytes: [UInt8]) throws(IdentityKeyError) -> UInt64 {
        guard bytes.count == 8 else { throw .wrongLength(expected: 8, got: bytes.count) }
        return bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// The 8 wire bytes of a peer ID.
    public static func peerIDBytes(_ peerID: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: peerID >> (56 - 8 * UInt64($0))) }
    }
}
