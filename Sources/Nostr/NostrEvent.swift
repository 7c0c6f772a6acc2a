public import BotCrypto
public import BotSupport

/// An event before it has an id and a signature: what the bridge composes and what gets mined.
public struct UnsignedEvent: Equatable, Sendable {
    public var pubkey: XOnlyPublicKey
    /// Unix seconds. Fixed before mining (NOSTR-GEO §4).
    public var createdAt: Int64
    public var kind: Int
    /// Tags as arrays of strings, in order.
    public var tags: [[String]]
    public var content: String

    public init(pubkey: XOnlyPublicKey, createdAt: Int64, kind: Int, tags: [[String]], content: String) {
        self.pubkey = pubkey
        self.createdAt = createdAt
        self.kind = kind
        self.tags = tags
        self.content = content
    }

    /// The NIP-01 bytes that get hashed: `[0,<pubkey>,<created_at>,<kind>,<tags>,<content>]`.
    ///
    /// ```
    /// [0,"<64 lowercase hex>",<decimal>,<decimal>,[["t","v"],…],"<content>"]
    /// ```
    /// Compact, no whitespace; strings escaped by ``JSONWriter/appendString(_:into:)`` (NOSTR-GEO §2.3:
    /// `"` `\` and C0 controls escaped, `/`, U+007F and all non-ASCII raw UTF-8).
    public var canonicalBytes: [UInt8] {
        CanonicalJSON.serialize(pubkeyHex: pubkey.hex, createdAt: createdAt, kind: kind, tags: tags, content: content)
    }

    /// SHA-256 of ``canonicalBytes``.
    public var id: EventID { EventID(digest: SHA256.hash(canonicalBytes)) }

    /// Signs the id with `key` (which must own ``pubkey``). `auxiliaryRandomness` nil = fresh random (as
    /// phones do); tests pass 32 zero bytes to reproduce published vectors.
    public func signed(with key: SchnorrSecretKey, auxiliaryRandomness: [UInt8]? = nil) throws(CryptoError)
        -> NostrEvent
    {
        guard key.publicKey == pubkey else { throw .invalidKey("signing key does not match the event pubkey") }
        let id = self.id
        let signature = try key.signature(for: id.bytes, auxiliaryRandomness: auxiliaryRandomness)
        guard let sig = SchnorrSignature(bytes: signature) else {
            throw .invalidLength(what: "BIP-340 signature", expected: 64, actual: signature.count)
        }
        return NostrEvent(id: id, unsigned: self, signature: sig)
    }
}

/// A signed event whose id and signature are known to be right: it exists only after signing
/// (``UnsignedEvent/signed(with:auxiliaryRandomness:)``) or verification (``UnverifiedEvent/verified()``,
/// ``EventVerifier``). There is no way to build one with a placeholder id or without a signature.
public struct NostrEvent: Equatable, Sendable {
    public let id: EventID
    public let pubkey: XOnlyPublicKey
    public let createdAt: Int64
    public let kind: Int
    public let tags: [[String]]
    public let content: String
    public let signature: SchnorrSignature

    init(id: EventID, unsigned: UnsignedEvent, signature: SchnorrSignature) {
        self.id = id
        self.pubkey = unsigned.pubkey
        self.createdAt = unsigned.createdAt
        self.kind = unsigned.kind
        self.tags = unsigned.tags
        self.content = unsigned.content
        self.signature = signature
    }

    public var unsigned: UnsignedEvent {
        UnsignedEvent(pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content)
    }

    /// The first tag whose first element is `name`.
    public func firstTag(_ name: String) -> [String]? { tags.first { $0.first == name } }

    /// The NIP-01 event object (`id, pubkey, created_at, kind, tags, content, sig`, in that order).
    public var jsonValue: JSONValue {
        .object([
            ("id", .string(id.hex)),
            ("pubkey", .string(pubkey.hex)),
            ("created_at", .integer(createdAt)),
            ("kind", .integer(Int64(kind))),
            ("tags", .array(tags.map { .array($0.map { .string($0) }) })),
            ("content", .string(content)),
            ("sig", .string(signature.hex)),
        ])
    }

    /// Compact JSON of ``jsonValue``.
    public var json: String { String(decoding: jsonBytes, as: UTF8.self) }

    /// Compact JSON of ``jsonValue`` as UTF-8, written straight into one buffer (no value tree, no
    /// intermediate strings): byte-identical to `JSONWriter.compact(jsonValue)`, which a test pins. The
    /// bridge puts this on every carrier packet, so it is on the per-event path.
    public var jsonBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + content.utf8.count + tags.count * 24)
        CanonicalJSON.appendLiteral(#"{"id":""#, into: &out)
        Hex.append(id.bytes, to: &out)
        CanonicalJSON.appendLiteral(#"","pubkey":""#, into: &out)
        Hex.append(pubkey.bytes, to: &out)
        CanonicalJSON.appendLiteral(#"","created_at":"#, into: &out)
        CanonicalJSON.appendDecimal(createdAt, into: &out)
        CanonicalJSON.appendLiteral(#","kind":"#, into: &out)
        CanonicalJSON.appendDecimal(Int64(kind), into: &out)
        CanonicalJSON.appendLiteral(#","tags":"#, into: &out)
        CanonicalJSON.appendTags(tags, into: &out)
        CanonicalJSON.appendLiteral(#","content":"#, into: &out)
        JSONWriter.appendString(content, into: &out)
        CanonicalJSON.appendLiteral(#","sig":""#, into: &out)
        Hex.append(signature.bytes, to: &out)
        CanonicalJSON.appendLiteral(#""}"#, into: &out)
        return out
    }
}

/// An event as parsed from the wire: shape and limits checked, nothing cryptographic yet.
///
/// Hex fields are validated as lowercase hex of the right length at parse time (cheap); the id is
/// recomputed and the signature checked only by ``verified()`` or an ``EventVerifier``.
public struct UnverifiedEvent: Equatable, Sendable {
    /// Inbound limits of NOSTR-GEO §5.5 step 2 (iOS `NostrProtocol`), enforced while parsing.
    public enum Limits {
        /// More tags than this is never a bitchat event; iOS drops it (pinned: 65 rejected).
        public static let maxTags = 64
        /// Longest tag (`m` has 4 elements); iOS drops more than 16 (pinned: 17 rejected).
        public static let maxTagElements = 16
        /// Longest tag element in UTF-8 bytes; iOS drops longer (pinned: 1025 rejected).
        public static let maxTagElementBytes = 1024
    }

    /// The claimed id (nil when the input had none, e.g. an unsigned event for `nostr sign`).
    public let claimedID: EventID?
    /// 64 lowercase hex characters; a curve check happens at verification.
    public let pubkeyHex: String
    public let createdAt: Int64
    public let kind: Int
    public let tags: [[String]]
    public let content: String
    public let signature: SchnorrSignature?

    /// The canonical bytes of this event as claimed.
    public var canonicalBytes: [UInt8] {
        CanonicalJSON.serialize(pubkeyHex: pubkeyHex, createdAt: createdAt, kind: kind, tags: tags, content: content)
    }

    /// Fields already checked by a parser (``EventFrameFastPath``).
    init(
        claimedID: EventID?, pubkeyHex: String, createdAt: Int64, kind: Int, tags: [[String]], content: String,
        signature: SchnorrSignature?
    ) {
        self.claimedID = claimedID
        self.pubkeyHex = pubkeyHex
        self.createdAt = createdAt
        self.kind = kind
        self.tags = tags
        self.content = content
        self.signature = signature
    }

    /// Parses an event object. `id` and `sig` may be absent; every present field must be well formed.
    public init(json value: JSONValue) throws(NostrError) {
        guard case .object(let members) = value else { throw .wrongType(field: "event") }
        var id: JSONValue?, pubkey: JSONValue?, createdAt: JSONValue?, kind: JSONValue?
        var tags: JSONValue?, content: JSONValue?, sig: JSONValue?
        for (key, member) in members {
            switch key {
            case "id": id = member
            case "pubkey": pubkey = member
            case "created_at": createdAt = member
            case "kind": kind = member
            case "tags": tags = member
            case "content": content = member
            case "sig": sig = member
            default: continue  // Unknown members are ignored, as NIP-01 clients do.
            }
        }
        guard let pubkey else { throw .missingField("pubkey") }
        guard case .string(let pubkeyHex) = pubkey else { throw .wrongType(field: "pubkey") }
        guard Hex.isLowercase(pubkeyHex, byteCount: 32) else { throw .invalidHex(field: "pubkey") }
        guard let createdAt else { throw .missingField("created_at") }
        guard case .integer(let created) = createdAt else { throw .wrongType(field: "created_at") }
        guard created >= 0 else { throw .outOfRange(field: "created_at") }
        guard let kind else { throw .missingField("kind") }
        guard case .integer(let kindValue) = kind else { throw .wrongType(field: "kind") }
        guard (0...65535).contains(kindValue) else { throw .outOfRange(field: "kind") }
        guard let tags else { throw .missingField("tags") }
        guard case .array(let tagValues) = tags else { throw .wrongType(field: "tags") }
        guard tagValues.count <= Limits.maxTags else { throw .tooManyTags(tagValues.count) }
        var parsedTags: [[String]] = []
        parsedTags.reserveCapacity(tagValues.count)
        for tagValue in tagValues {
            guard case .array(let elements) = tagValue else { throw .wrongType(field: "tag") }
            guard elements.count <= Limits.maxTagElements else { throw .tooManyTagElements(elements.count) }
            var tag: [String] = []
            tag.reserveCapacity(elements.count)
            for element in elements {
                guard case .string(let text) = element else { throw .wrongType(field: "tag element") }
                let bytes = text.utf8.count
                guard bytes <= Limits.maxTagElementBytes else { throw .tagElementTooLong(bytes: bytes) }
                tag.append(text)
            }
            parsedTags.append(tag)
        }
        guard let content else { throw .missingField("content") }
        guard case .string(let contentText) = content else { throw .wrongType(field: "content") }
        var claimedID: EventID?
        if let id {
            guard case .string(let idHex) = id else { throw .wrongType(field: "id") }
            claimedID = try EventID(hex: idHex)
        }
        var signature: SchnorrSignature?
        if let sig {
            guard case .string(let sigHex) = sig else { throw .wrongType(field: "sig") }
            signature = try SchnorrSignature(hex: sigHex)
        }
        self.claimedID = claimedID
        self.pubkeyHex = pubkeyHex
        self.createdAt = created
        self.kind = Int(kindValue)
        self.tags = parsedTags
        self.content = contentText
        self.signature = signature
    }

    /// Parses a JSON text holding one event object.
    public init(json text: String, maxBytes: Int = RelayMessage.Limits.maxFrameBytes) throws(NostrError) {
        let value: JSONValue
        do {
            value = try JSONParser(limits: .init(maxBytes: maxBytes, maxDepth: 8)).parse(text)
        } catch {
            throw .invalidJSON(error)
        }
        try self.init(json: value)
    }

    /// Verifies without a budget (operator tools, tests): id first, then Schnorr.
    public func verified() throws(NostrError) -> NostrEvent {
        let (id, signature) = try checkID()
        return try checkSignature(id: id, signature: signature)
    }

    /// Cheap part: required fields present and the recomputed id string-equal to the claimed id.
    func checkID() throws(NostrError) -> (EventID, SchnorrSignature) {
        guard let claimedID else { throw .missingField("id") }
        guard let signature else { throw .missingField("sig") }
        guard SHA256.hash(canonicalBytes) == claimedID.bytes else { throw .idMismatch }
        return (claimedID, signature)
    }

    /// Expensive part: the curve check of the pubkey and BIP-340 verification.
    func checkSignature(id: EventID, signature: SchnorrSignature) throws(NostrError) -> NostrEvent {
        guard let pubkey = try? XOnlyPublicKey(hex: pubkeyHex) else { throw .invalidPublicKey }
        guard pubkey.isValidSignature(signature.bytes, for: id.bytes) else { throw .badSignature }
        let unsigned = UnsignedEvent(pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content)
        return NostrEvent(id: id, unsigned: unsigned, signature: signature)
    }

    /// The unsigned event (for `nostr sign`); the pubkey must be a valid curve point.
    public func unsigned() throws(NostrError) -> UnsignedEvent {
        guard let pubkey = try? XOnlyPublicKey(hex: pubkeyHex) else { throw .invalidPublicKey }
        return UnsignedEvent(pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content)
    }
}

/// The hand-written NIP-01 serialiser (never JSONEncoder/JSONSerialization for hashed bytes).
enum CanonicalJSON {
    static func serialize(pubkeyHex: String, createdAt: Int64, kind: Int, tags: [[String]], content: String)
        -> [UInt8]
    {
        var out: [UInt8] = []
        out.reserveCapacity(128 + content.utf8.count + tags.count * 24)
        CanonicalJSON.appendLiteral("[0,", into: &out)
        JSONWriter.appendString(pubkeyHex, into: &out)
        out.append(UInt8(ascii: ","))
        appendDecimal(createdAt, into: &out)
        out.append(UInt8(ascii: ","))
        appendDecimal(Int64(kind), into: &out)
        out.append(UInt8(ascii: ","))
        appendTags(tags, into: &out)
        out.append(UInt8(ascii: ","))
        JSONWriter.appendString(content, into: &out)
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// Appends the bytes of a literal in one copy (a `String.UTF8View` append goes element by element).
    @inline(__always)
    static func appendLiteral(_ literal: StaticString, into out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// `[["t","v"],…]` with the canonical string escaping.
    static func appendTags(_ tags: [[String]], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (i, tag) in tags.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "["))
            for (j, element) in tag.enumerated() {
                if j > 0 { out.append(UInt8(ascii: ",")) }
                JSONWriter.appendString(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "]"))
    }

    /// The decimal digits of `value` (what `String(value)` spells), without a temporary string.
    static func appendDecimal(_ value: Int64, into out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch for ≤ 19 digits, written backwards
        var count = 0
        withUnsafeMutableBytes(of: &digits) { scratch in
            repeat {
                count += 1
                scratch[24 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: scratch[(24 - count)..<24])
        }
    }
}
