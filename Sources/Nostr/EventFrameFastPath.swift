/// The fast path of ``RelayMessage/parse(_:)-([UInt8])`` for the one frame a relay sends thousands of
/// times a second: a compact `EVENT` frame whose event object has exactly the NIP-01 members.
///
/// ```
/// ["EVENT","<sub>",{"id":"<64 hex>","pubkey":"<64 hex>","created_at":<n>,"kind":<n>,
///   "tags":[["g","u4pruy"],…],"content":"<text>","sig":"<128 hex>"}]      members in any order
/// ```
/// It reads the bytes once, straight into the event's fields (no `JSONValue` tree, no key set), and
/// accepts only what it fully understands: no whitespace, no escapes in strings, no unknown or repeated
/// members, non-negative integers of at most 18 digits without leading zeros, and every NOSTR-GEO §5.5
/// limit and hex rule already met. Anything else — including every input the strict parser would reject —
/// returns nil and the caller runs the general parser, so every rejection keeps its named
/// ``NostrError`` and an accepted frame yields exactly what the general parser yields
/// (`EventFrameFastPathTests` compares the two on random and mutated frames).
enum EventFrameFastPath {
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> RelayMessage? {
        var cursor = FastCursor(bytes: bytes)
        guard cursor.skip(prefix), let subscription = cursor.plainString(), cursor.skip(UInt8(ascii: ",")),
            let event = cursor.eventObject(), cursor.skip(UInt8(ascii: "]")), cursor.atEnd
        else { return nil }
        return .event(subscription: subscription, event: event)
    }

    private static let prefix: [UInt8] = Array(#"["EVENT","#.utf8)
}

private struct FastCursor {
    let bytes: UnsafeBufferPointer<UInt8>
    var offset = 0

    /// At most 18 decimal digits always fit an `Int64` (longer numbers go to the general parser).
    private static let maxDigits = 18

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    var atEnd: Bool { offset == bytes.count }

    mutating func skip(_ byte: UInt8) -> Bool {
        guard offset < bytes.count, bytes[offset] == byte else { return false }
        offset += 1
        return true
    }

    mutating func skip(_ literal: [UInt8]) -> Bool {
        guard bytes.count - offset >= literal.count else { return false }
        for (i, byte) in literal.enumerated() where bytes[offset + i] != byte { return false }
        offset += literal.count
        return true
    }

    /// The bytes of a string without escapes or control characters (quotes consumed), or nil.
    mutating func plainStringBytes() -> UnsafeBufferPointer<UInt8>? {
        guard skip(UInt8(ascii: "\"")) else { return nil }
        let start = offset
        while offset < bytes.count {
            let c = bytes[offset]
            if c == UInt8(ascii: "\"") {
                offset += 1
                return UnsafeBufferPointer(rebasing: bytes[start..<(offset - 1)])
            }
            if c == UInt8(ascii: "\\") || c < 0x20 { return nil }
            offset += 1
        }
        return nil
    }

    mutating func plainString() -> String? {
        guard let raw = plainStringBytes() else { return nil }
        return Self.string(raw)
    }

    /// The string of `raw` when it is valid UTF-8, else nil. ASCII (most chat, every tag in practice) is
    /// valid by construction, so it is decoded without the generic validating initialiser; both give the
    /// same string for the same valid bytes.
    static func string(_ raw: UnsafeBufferPointer<UInt8>) -> String? {
        var high: UInt8 = 0
        for c in raw { high |= c }
        if high < 0x80 { return String(decoding: raw, as: UTF8.self) }
        return String(validating: raw, as: UTF8.self)
    }

    /// A non-negative integer as the general parser reads it into `.integer`, or nil.
    mutating func smallUnsigned() -> Int64? {
        let start = offset
        var value: Int64 = 0
        while offset < bytes.count, bytes[offset] >= 0x30, bytes[offset] <= 0x39 {
            guard offset - start < Self.maxDigits else { return nil }  // checked before the multiply
            value = value * 10 + Int64(bytes[offset] - 0x30)
            offset += 1
        }
        let digits = offset - start
        guard digits >= 1, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        return value
    }

    /// A string of exactly `count` bytes' worth of lowercase hex (its raw characters), or nil.
    mutating func lowercaseHex(byteCount count: Int) -> UnsafeBufferPointer<UInt8>? {
        guard let raw = plainStringBytes(), raw.count == count * 2 else { return nil }
        for c in raw where !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66)) { return nil }
        return raw
    }

    mutating func hexBytes(byteCount count: Int) -> [UInt8]? {
        guard let raw = lowercaseHex(byteCount: count) else { return nil }
        return [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            for i in 0..<count { out[i] = Self.nibble(raw[2 * i]) << 4 | Self.nibble(raw[2 * i + 1]) }
            initialized = count
        }
    }

    @inline(__always)
    private static func nibble(_ c: UInt8) -> UInt8 { c <= 0x39 ? c - 0x30 : c - 0x61 + 10 }

    /// `[[…],…]` of plain strings within the §5.5 tag limits, or nil.
    mutating func tags() -> [[String]]? {
        guard skip(UInt8(ascii: "[")) else { return nil }
        var tags: [[String]] = []
        if skip(UInt8(ascii: "]")) { return tags }
        repeat {
            guard tags.count < UnverifiedEvent.Limits.maxTags, skip(UInt8(ascii: "[")) else { return nil }
            var tag: [String] = []
            if !skip(UInt8(ascii: "]")) {
                repeat {
                    guard tag.count < UnverifiedEvent.Limits.maxTagElements, let raw = plainStringBytes(),
                        raw.count <= UnverifiedEvent.Limits.maxTagElementBytes,
                        let element = Self.string(raw)
                    else { return nil }
                    tag.append(element)
                } while skip(UInt8(ascii: ","))
                guard skip(UInt8(ascii: "]")) else { return nil }
            }
            tags.append(tag)
        } while skip(UInt8(ascii: ","))
        guard skip(UInt8(ascii: "]")) else { return nil }
        return tags
    }

    /// The event object with each member at most once and nothing unknown, or nil.
    mutating func eventObject() -> UnverifiedEvent? {
        guard skip(UInt8(ascii: "{")) else { return nil }
        var id: [UInt8]?, signature: [UInt8]?, pubkey: String?, createdAt: Int64?, kind: Int64?
        var tags: [[String]]?, content: String?
        repeat {
            guard let key = plainStringBytes(), skip(UInt8(ascii: ":")) else { return nil }
            switch key.count {
            case 2 where Self.equal(key, "id"):
                guard id == nil, let value = hexBytes(byteCount: 32) else { return nil }
                id = value
            case 3 where Self.equal(key, "sig"):
                guard signature == nil, let value = hexBytes(byteCount: 64) else { return nil }
                signature = value
            case 4 where Self.equal(key, "kind"):
                guard kind == nil, let value = smallUnsigned(), value <= 65535 else { return nil }
                kind = value
            case 4 where Self.equal(key, "tags"):
                guard tags == nil, let value = self.tags() else { return nil }
                tags = value
            case 6 where Self.equal(key, "pubkey"):
                guard pubkey == nil, let raw = lowercaseHex(byteCount: 32) else { return nil }
                pubkey = String(decoding: raw, as: UTF8.self)
            case 7 where Self.equal(key, "content"):
                guard content == nil, let value = plainString() else { return nil }
                content = value
            case 10 where Self.equal(key, "created_at"):
                guard createdAt == nil, let value = smallUnsigned() else { return nil }
                createdAt = value
            default:
                return nil
            }
        } while skip(UInt8(ascii: ","))
        guard skip(UInt8(ascii: "}")), let pubkey, let createdAt, let kind, let tags, let content else { return nil }
        var claimedID: EventID?
        if let id {
            guard let parsed = EventID(bytes: id) else { return nil }
            claimedID = parsed
        }
        var parsedSignature: SchnorrSignature?
        if let signature {
            guard let parsed = SchnorrSignature(bytes: signature) else { return nil }
            parsedSignature = parsed
        }
        return UnverifiedEvent(
            claimedID: claimedID, pubkeyHex: pubkey, createdAt: createdAt, kind: Int(kind), tags: tags, content: content,
            signature: parsedSignature)
    }

    private static func equal(_ raw: UnsafeBufferPointer<UInt8>, _ key: StaticString) -> Bool {
        guard raw.count == key.utf8CodeUnitCount else { return false }
        let start = key.utf8Start
        for i in 0..<raw.count where raw[i] != start[i] { return false }
        return true
    }
}
