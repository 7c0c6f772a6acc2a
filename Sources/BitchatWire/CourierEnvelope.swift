import BotCrypto

/// The courier envelope (the payload of mesh type 0x04 and, base64, the content of a kind-1401 drop), COURIER.md §1:
/// TLVs with a 1-byte type and a 2-byte big-endian length.
///
/// ```
/// 01 0010 recipient tag (16 bytes, §1.4)
/// 02 0008 expiry, u64 BE milliseconds since the epoch
/// 03 len  ciphertext, 1–16 384 bytes, opaque (sealed to the recipient; never opened here)
/// 04 0001 copies (spray budget), absent = 1, clamped into 1…8
/// 05 0004 prekey ID, u32 BE (present = sealed to a one-time prekey)
/// ```
/// Decoding follows iOS (`CourierEnvelope.decode`): unknown types are skipped, a repeated known type overwrites the
/// earlier one, copies 0 or above 8 is clamped; expiry is not checked (``isExpired(nowMs:)`` is the caller's).
/// Encoding writes only the canonical form, which the stricter Android PR decoder also accepts: 01, 02, 03, then 04
/// only when copies > 1, then 05 when set, each once.
public struct CourierEnvelope: Sendable, Equatable, Hashable {
    public enum Limits {
        public static let tagLength = 16
        public static let maxCiphertextBytes = 16_384
        public static let maxCopies: UInt8 = 8
        /// The whole encoded envelope in a relay drop (iOS `BridgeCourierService.Limits.maxDropEnvelopeBytes`).
        public static let maxDropEnvelopeBytes = 20_480
    }

    public let recipientTag: [UInt8]
    /// Milliseconds since the Unix epoch; the envelope is void from then on.
    public let expiryMs: UInt64
    public let ciphertext: [UInt8]
    /// The spray budget, 1…8.
    public let copies: UInt8
    public let prekeyID: UInt32?

    /// `copies` is clamped into 1…8 as iOS's initialiser does.
    public init(recipientTag: [UInt8], expiryMs: UInt64, ciphertext: [UInt8], copies: UInt8 = 1, prekeyID: UInt32? = nil) {
        self.recipientTag = recipientTag
        self.expiryMs = expiryMs
        self.ciphertext = ciphertext
        self.copies = min(max(copies, 1), Limits.maxCopies)
        self.prekeyID = prekeyID
    }

    /// Void once `nowMs` reaches the expiry (so expiry 0 is always void).
    public func isExpired(nowMs: UInt64) -> Bool { nowMs >= expiryMs }

    /// The same envelope with another spray budget: relay drops and handovers of held mail carry 1 (COURIER.md §0.3).
    public func withCopies(_ copies: UInt8) -> CourierEnvelope {
        CourierEnvelope(recipientTag: recipientTag, expiryMs: expiryMs, ciphertext: ciphertext, copies: copies, prekeyID: prekeyID)
    }

    public func encode() throws(WireError) -> [UInt8] {
        guard recipientTag.count == Limits.tagLength else { throw .invalidLength(field: .recipientTag, length: recipientTag.count) }
        guard (1...Limits.maxCiphertextBytes).contains(ciphertext.count) else {
            throw .invalidLength(field: .ciphertext, length: ciphertext.count)
        }
        var out: [UInt8] = []
        out.reserveCapacity(3 * 5 + Limits.tagLength + 8 + ciphertext.count + 1 + 4)
        out.appendTLV16(0x01, recipientTag)
        var expiry: [UInt8] = []
        expiry.appendBigEndian(expiryMs, size: 8)
        out.appendTLV16(0x02, expiry)
        out.appendTLV16(0x03, ciphertext)
        if copies > 1 { out.appendTLV16(0x04, [copies]) }
        if let prekeyID {
            var value: [UInt8] = []
            value.appendBigEndian(UInt64(prekeyID), size: 4)
            out.appendTLV16(0x05, value)
        }
        return out
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> CourierEnvelope {
        var tag: [UInt8]?
        var expiry: UInt64?
        var ciphertext: [UInt8]?
        var copies: UInt8 = 1
        var prekeyID: UInt32?
        var reader = ByteReader(bytes)
        while !reader.isAtEnd {
            let (type, value) = try reader.tlv(lengthSize: { _ in 2 })
            switch type {
            case 0x01:
                guard value.count == Limits.tagLength else { throw .invalidLength(field: .recipientTag, length: value.count) }
                tag = value
            case 0x02:
                guard value.count == 8 else { throw .invalidLength(field: .expiry, length: value.count) }
                expiry = value.reduce(0) { $0 << 8 | UInt64($1) }
            case 0x03:
                guard (1...Limits.maxCiphertextBytes).contains(value.count) else {
                    throw .invalidLength(field: .ciphertext, length: value.count)
                }
                ciphertext = value
            case 0x04:
                guard value.count == 1 else { throw .invalidLength(field: .copies, length: value.count) }
                copies = value[0]
            case 0x05:
                guard value.count == 4 else { throw .invalidLength(field: .prekeyID, length: value.count) }
                prekeyID = value.reduce(0) { $0 << 8 | UInt32($1) }
            default:
                continue
            }
        }
        guard let tag else { throw .missingTLV(0x01) }
        guard let expiry else { throw .missingTLV(0x02) }
        guard let ciphertext else { throw .missingTLV(0x03) }
        return CourierEnvelope(recipientTag: tag, expiryMs: expiry, ciphertext: ciphertext, copies: copies, prekeyID: prekeyID)
    }
}

/// The rotating recipient tag (COURIER.md §1.4): HMAC-SHA256 keyed by the recipient's 32-byte Noise static public key
/// over ASCII `bitchat-courier-tag-v1` ‖ u32 BE UTC day, cut to 16 bytes. Senders tag with the current day; receivers
/// (and a gateway watching for them) test day − 1, day and day + 1.
public enum CourierTag {
    static let label = Array("bitchat-courier-tag-v1".utf8)

    /// The UTC day number of `unixSeconds` (negative times count as day 0).
    public static func day(unixSeconds: Int64) -> UInt32 { UInt32(clamping: max(0, unixSeconds) / 86_400) }

    public static func tag(noiseKey: [UInt8], day: UInt32) -> [UInt8] {
        var message = label
        message.appendBigEndian(UInt64(day), size: 4)
        return Array(HMACSHA256.authenticationCode(key: noiseKey, message: message).prefix(CourierEnvelope.Limits.tagLength))
    }

    /// The tags of days d − 1, d and d + 1 around `unixSeconds` (d − 1 is 0 on day 0, as iOS computes it).
    public static func candidates(noiseKey: [UInt8], unixSeconds: Int64) -> [[UInt8]] {
        let today = day(unixSeconds: unixSeconds)
        return [today == 0 ? 0 : today - 1, today, today &+ 1].map { tag(noiseKey: noiseKey, day: $0) }
    }
}
