import BotCrypto
import BotSupport

/// Identities derived from a public message; none travels on the wire (MESH-WIRE §5.3, §7.3, §8.2).
public enum MeshMessageIdentity {
    /// iOS `MeshMessageIdentity`: first 32 hex of SHA-256(lowercase(senderHex) | ms | trim(content)).
    /// The bridge's rendezvous event carries it in its `m` tag.
    ///
    /// `trim` removes Unicode White_Space scalars at both ends — Foundation's whitespace-and-newline set
    /// except for the U+001C…U+001F separators, which Foundation also strips (MESH-WIRE §14.8); we include
    /// those too so ordinary and odd text alike match iOS.
    public static func stableID(senderHex: String, timestampMs: UInt64, content: String) -> String {
        let text = senderHex.lowercased() + "|" + String(timestampMs) + "|" + trim(content)
        return String(Hex.encode(SHA256.hash(utf8: text)).prefix(32))
    }

    /// Network dedup key: `<senderHex>-<ms>-<type decimal>-<hex(SHA-256(payload))[0..8]>` (iOS, §7.3).
    public static func dedupKey(_ packet: MeshPacket) -> String {
        let digest = SHA256.hash(packet.payload)
        return packet.sender.hex + "-" + String(packet.timestamp) + "-" + String(packet.type.rawValue) + "-"
            + Hex.encode(digest.prefix(4))
    }

    /// Gossip packet ID: SHA-256(type ‖ sender ‖ timestamp u64 ‖ payload)[0..16] (§8.2).
    public static func packetID(_ packet: MeshPacket) -> [UInt8] {
        var bytes: [UInt8] = [packet.type.rawValue]
        bytes.appendBigEndian(packet.sender.rawValue, size: 8)
        bytes.appendBigEndian(packet.timestamp, size: 8)
        bytes += packet.payload
        return Array(SHA256.hash(bytes).prefix(16))
    }

    static func trim(_ text: String) -> String {
        let scalars = text.unicodeScalars
        func isSpace(_ s: Unicode.Scalar) -> Bool {
            s.properties.isWhitespace || (0x1C...0x1F).contains(s.value) || s.value == 0x85
        }
        guard let first = scalars.firstIndex(where: { !isSpace($0) }),
            let last = scalars.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(scalars[first...last])
    }
}
