/// The `BitchatMessage` binary struct (MESH-WIRE §5.4). Neither app puts it on the air today — public chat
/// is raw UTF-8 — but both contain it and pin it with vectors, so we can decode it if it ever appears.
///
/// ```
/// flags u8 | timestamp u64 ms | id (u8 len + UTF-8) | sender (u8 len + UTF-8) | content (u16 len + UTF-8)
/// [0x04 originalSender u8+UTF-8] [0x08 recipientNickname u8+UTF-8] [0x10 senderPeerID u8+UTF-8]
/// [0x20 mentions: u8 count, then u8+UTF-8 each] [0x40 (Android) channel u8+UTF-8]
/// flags: 0x01 relay, 0x02 private, 0x40 iOS "bridged" / Android "has channel", 0x80 Android "encrypted"
/// ```
public struct BitchatMessagePayload: Sendable, Equatable {
    public enum Limits {
        /// flags + timestamp + three length prefixes with empty strings (+ 1 for the u16 content length).
        public static let minimumLength = 13
    }

    /// What flag 0x40 means: the two apps disagree (MESH-WIRE §5.4).
    public enum Layout: Sendable { case iOS, android }

    public var flags: UInt8
    public var timestamp: UInt64
    public var id: String
    public var sender: String
    public var content: String
    public var originalSender: String?
    public var recipientNickname: String?
    public var senderPeerID: String?
    public var mentions: [String]
    /// Android only (flag 0x40 with the Android layout).
    public var channel: String?

    public init(
        flags: UInt8 = 0, timestamp: UInt64, id: String, sender: String, content: String, originalSender: String? = nil,
        recipientNickname: String? = nil, senderPeerID: String? = nil, mentions: [String] = [], channel: String? = nil
    ) {
        self.flags = flags
        self.timestamp = timestamp
        self.id = id
        self.sender = sender
        self.content = content
        self.originalSender = originalSender
        self.recipientNickname = recipientNickname
        self.senderPeerID = senderPeerID
        self.mentions = mentions
        self.channel = channel
    }

    /// Optional-field flags are derived from the values present; 0x01/0x02/0x80 come from ``flags``.
    public func encode(layout: Layout = .android) throws(WireError) -> [UInt8] {
        var flags = self.flags & (0x01 | 0x02 | 0x80 | (layout == .iOS ? 0x40 : 0))
        if originalSender != nil { flags |= 0x04 }
        if recipientNickname != nil { flags |= 0x08 }
        if senderPeerID != nil { flags |= 0x10 }
        if !mentions.isEmpty { flags |= 0x20 }
        if layout == .android, channel != nil { flags |= 0x40 }
        var out: [UInt8] = [flags]
        out.appendBigEndian(timestamp, size: 8)
        func short(_ text: String) throws(WireError) {
            let bytes = Array(text.utf8)
            guard bytes.count <= 255 else { throw .invalidLength(field: .text, length: bytes.count) }
            out.append(UInt8(bytes.count))
            out += bytes
        }
        try short(id)
        try short(sender)
        let body = Array(content.utf8)
        guard body.count <= 0xFFFF else { throw .invalidLength(field: .text, length: body.count) }
        out.appendBigEndian(UInt64(body.count), size: 2)
        out += body
        if let originalSender { try short(originalSender) }
        if let recipientNickname { try short(recipientNickname) }
        if let senderPeerID { try short(senderPeerID) }
        if !mentions.isEmpty {
            guard mentions.count <= 255 else { throw .invalidLength(field: .text, length: mentions.count) }
            out.append(UInt8(mentions.count))
            for mention in mentions { try short(mention) }
        }
        if layout == .android, let channel { try short(channel) }
        return out
    }

    public static func decode(_ bytes: [UInt8], layout: Layout = .android) throws(WireError) -> BitchatMessagePayload {
        guard bytes.count >= Limits.minimumLength else {
            throw .truncated(field: .payload, needed: Limits.minimumLength, available: bytes.count)
        }
        var reader = ByteReader(bytes)
        func short() throws(WireError) -> String {
            let length = Int(try reader.u8(.text))
            guard let text = decodeUTF8(try reader.take(length, .text)) else { throw .invalidUTF8(field: .text) }
            return text
        }
        let flags = try reader.u8(.payload)
        // Only the flags that carry no field are stored; the others follow from the fields present.
        let stored = flags & (0x01 | 0x02 | 0x80 | (layout == .iOS ? 0x40 : 0))
        var message = BitchatMessagePayload(flags: stored, timestamp: try reader.uint(8, .payload), id: "", sender: "", content: "")
        message.id = try short()
        message.sender = try short()
        let contentLength = Int(try reader.uint(2, .text))
        guard let content = decodeUTF8(try reader.take(contentLength, .text)) else { throw .invalidUTF8(field: .text) }
        message.content = content
        if flags & 0x04 != 0 { message.originalSender = try short() }
        if flags & 0x08 != 0 { message.recipientNickname = try short() }
        if flags & 0x10 != 0 { message.senderPeerID = try short() }
        if flags & 0x20 != 0 {
            let count = Int(try reader.u8(.text))
            for _ in 0..<count { message.mentions.append(try short()) }
        }
        if layout == .android, flags & 0x40 != 0 { message.channel = try short() }
        return message
    }
}

/// The file-transfer TLV (type 0x22 payload; Android also tries it on 0x02), MESH-WIRE §12.1 A10.
///
/// ```
/// 01 u16 len name | 02 u16 len(=4) size u32 | 03 u16 len mime | 04 u32 len content
/// ```
public struct FilePacketPayload: Sendable, Equatable {
    public var name: String
    public var size: UInt32
    public var mimeType: String
    public var content: [UInt8]

    public init(name: String, size: UInt32, mimeType: String, content: [UInt8]) {
        self.name = name
        self.size = size
        self.mimeType = mimeType
        self.content = content
    }

    public func encode() -> [UInt8] {
        var out: [UInt8] = []
        out.appendTLV16(0x01, Array(name.utf8))
        var sizeBytes: [UInt8] = []
        sizeBytes.appendBigEndian(UInt64(size), size: 4)
        out.appendTLV16(0x02, sizeBytes)
        out.appendTLV16(0x03, Array(mimeType.utf8))
        out.append(0x04)
        out.appendBigEndian(UInt64(content.count), size: 4)
        out += content
        return out
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> FilePacketPayload {
        var name: String?
        var size: UInt32?
        var mime: String?
        var content: [UInt8]?
        var reader = ByteReader(bytes)
        while !reader.isAtEnd {
            let (type, value) = try reader.tlv(lengthSize: { $0 == 0x04 ? 4 : 2 })
            switch type {
            case 0x01: name = decodeUTF8(value)
            case 0x02:
                guard value.count == 4 else { throw .invalidLength(field: .payload, length: value.count) }
                size = UInt32(value.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
            case 0x03: mime = decodeUTF8(value)
            case 0x04: content = value
            default: continue
            }
        }
        guard let name else { throw .missingTLV(0x01) }
        guard let content else { throw .missingTLV(0x04) }
        return FilePacketPayload(name: name, size: size ?? UInt32(clamping: content.count), mimeType: mime ?? "", content: content)
    }
}

/// Ping/pong payload (types 0x26/0x27): 8-byte nonce + 1-byte origin TTL; trailing bytes tolerated.
public struct PingPayload: Sendable, Equatable {
    public var nonce: UInt64
    public var originTTL: UInt8

    public init(nonce: UInt64, originTTL: UInt8) {
        self.nonce = nonce
        self.originTTL = originTTL
    }

    public func encode() -> [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(nonce, size: 8)
        out.append(originTTL)
        return out
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> PingPayload {
        var reader = ByteReader(bytes)
        return PingPayload(nonce: try reader.uint(8, .payload), originTTL: try reader.u8(.payload))
    }

    /// Hops travelled: origin TTL − received TTL + 1.
    public func hops(receivedTTL: UInt8) -> Int { Int(originTTL) - Int(receivedTTL) + 1 }
}
