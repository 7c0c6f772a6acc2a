import BotSupport

/// A NIP-01 event id: SHA-256 of the canonical serialisation. 32 bytes; hex only at the JSON edge.
public struct EventID: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// Wraps exactly 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    init(digest: [UInt8]) {
        precondition(digest.count == 32, "SHA-256 digests are 32 bytes")
        bytes = digest
    }

    /// Parses 64 **lowercase** hex characters (phones string-compare ids, so uppercase never matches).
    public init(hex: String) throws(NostrError) {
        guard Hex.isLowercase(hex, byteCount: 32), let bytes = try? Hex.decode(hex, expectedCount: 32) else {
            throw .invalidHex(field: "id")
        }
        self.bytes = bytes
    }

    public var hex: String { Hex.encode(bytes) }
    public var description: String { hex }
}

/// A 64-byte BIP-340 signature.
public struct SchnorrSignature: Hashable, Sendable {
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 64 else { return nil }
        self.bytes = bytes
    }

    /// Parses 128 lowercase hex characters.
    public init(hex: String) throws(NostrError) {
        guard Hex.isLowercase(hex, byteCount: 64), let bytes = try? Hex.decode(hex, expectedCount: 64) else {
            throw .invalidHex(field: "sig")
        }
        self.bytes = bytes
    }

    public var hex: String { Hex.encode(bytes) }
}

/// Event kinds this project names (NOSTR-GEO §1). Any 0…65535 is a valid kind on the wire.
public enum NostrKind {
    /// Geohash channel chat and bridge rendezvous messages (ephemeral).
    public static let ephemeralChat = 20000
    /// Presence heartbeats (ephemeral).
    public static let presence = 20001
    /// NIP-42 client authentication.
    public static let clientAuthentication = 22242

    /// NIP-01 ephemeral range: relays are not expected to store these.
    public static func isEphemeral(_ kind: Int) -> Bool { (20000..<30000).contains(kind) }
}
