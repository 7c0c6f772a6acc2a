/// The first byte of a decrypted Noise transport message (type 0x11) and its body (MESH-WIRE §3.1). The bridge
/// does not run Noise; these codecs exist so the pinned vectors pass and a future DM path has them.
public struct NoisePayload: Sendable, Equatable {
    public enum Kind: UInt8, Sendable {
        case privateMessage = 0x01, readReceipt = 0x02, delivered = 0x03, groupInvite = 0x06, groupKeyUpdate = 0x07
        case voiceFrame = 0x08, verifyChallenge = 0x10, verifyResponse = 0x11, vouch = 0x12, privateFile = 0x20
        case authenticatedPeerState = 0x21
    }

    /// Android's legacy private-file byte, re-encoded as 0x20.
    public static let legacyPrivateFile: UInt8 = 0x09

    public var type: UInt8
    public var data: [UInt8]

    public init(type: UInt8, data: [UInt8]) {
        self.type = type
        self.data = data
    }

    public func encode() -> [UInt8] { [type] + data }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> NoisePayload {
        guard let first = bytes.first else { throw .truncated(field: .payload, needed: 1, available: 0) }
        let type = first == legacyPrivateFile ? Kind.privateFile.rawValue : first
        return NoisePayload(type: type, data: Array(bytes.dropFirst()))
    }
}

/// A private message inside a Noise payload of kind 0x01: TLV 0x00 message ID, 0x01 content, 1-byte lengths.
public struct PrivateMessagePayload: Sendable, Equatable {
    public var messageID: String
    public var content: String

    public init(messageID: String, content: String) {
        self.messageID = messageID
        self.content = content
    }

    public func encode() throws(WireError) -> [UInt8] {
        let id = Array(messageID.utf8), body = Array(content.utf8)
        guard id.count <= 255, body.count <= 255 else { throw .invalidLength(field: .text, length: max(id.count, body.count)) }
        return [0x00, UInt8(id.count)] + id + [0x01, UInt8(body.count)] + body
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> PrivateMessagePayload {
        var id: String?
        var content: String?
        var reader = ByteReader(bytes)
        while !reader.isAtEnd {
            let (type, value) = try reader.tlv(lengthSize: { _ in 1 })
            switch type {
            case 0x00: id = decodeUTF8(value)
            case 0x01: content = decodeUTF8(value)
            default: continue
            }
        }
        guard let id else { throw .missingTLV(0x00) }
        guard let content else { throw .missingTLV(0x01) }
        return PrivateMessagePayload(messageID: id, content: content)
    }
}
