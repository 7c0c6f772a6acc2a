public import BotSupport
import BotCrypto

/// An 8-byte bitchat peer ID: SHA-256(Noise X25519 static public key)[0..8] (MESH-WIRE §3.2).
/// Held as a big-endian `UInt64` so it hashes and compares cheaply. Text form: 16 lowercase hex.
public struct MeshPeerID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// From wire bytes: longer input is truncated to 8 bytes, shorter is padded with 0x00 (MESH-WIRE §2.3).
    public init(bytes: some Collection<UInt8>) {
        var value: UInt64 = 0
        var count = 0
        for byte in bytes.prefix(8) {
            value = value << 8 | UInt64(byte)
            count += 1
        }
        if count < 8 { value <<= UInt64(8 * (8 - count)) }
        rawValue = value
    }

    /// From 16 hex characters (either case).
    public init(hex: String) throws(Hex.DecodeError) {
        self.init(bytes: try Hex.decode(hex, expectedCount: 8))
    }

    /// The peer ID a Noise static public key hashes to.
    public init(noisePublicKey: [UInt8]) {
        self.init(bytes: SHA256.hash(noisePublicKey).prefix(8))
    }

    /// `FF×8`: the broadcast recipient.
    public static let broadcast = MeshPeerID(rawValue: .max)

    public var bytes: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: rawValue >> UInt64(56 - 8 * $0)) }
    }

    public var hex: String { Hex.encode(bytes) }

    public var isBroadcast: Bool { rawValue == .max }

    public var description: String { hex }

    public static func < (lhs: MeshPeerID, rhs: MeshPeerID) -> Bool { lhs.rawValue < rhs.rawValue }
}
