public import BotCrypto
public import BotSupport
public import Nostr
public import Identity

/// What one site record is about (issue 35): one target, so actions on different targets never touch the same
/// record, and actions on one target replace each other (the newest wins).
public enum SiteTarget: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// A blocked sender (a Nostr author or a mesh fingerprint).
    case block(IdentityKey)
    /// A staff mark (`allow`): the judge never hides them.
    case staff(IdentityKey)
    /// A denylist keyword, lowercased (the denylist matches keywords case-insensitively).
    case word(String)
    /// A released channel message, by its Nostr event id (64 hex): carried on every stage, not hidden again.
    case release(String)
    /// A stage's heartbeat (its name): the newest says when the stage was last heard and how it was (``SiteRecord/status``).
    case stage(String)

    public enum Limits {
        /// Longest keyword: the denylist's own pattern limit.
        public static let maxWordBytes = Denylist.Limits.maxPatternBytes
        /// Longest stage name (a bridge's nickname).
        public static let maxStageBytes = 64
    }

    /// `block:nostr:<hex>`, `staff:mesh:<hex>`, `word:<term>`, `release:<event id>`.
    public var description: String {
        switch self {
        case .block(let key): "block:\(key.qualified)"
        case .staff(let key): "staff:\(key.qualified)"
        case .word(let term): "word:\(term)"
        case .release(let id): "release:\(id)"
        case .stage(let name): "stage:\(name)"
        }
    }

    public init(parsing text: String) throws(SiteRecordError) {
        guard let colon = text.firstIndex(of: ":") else { throw .badPayload("target '\(text.prefix(40))' has no kind") }
        let kind = text[..<colon]
        let value = String(text[text.index(after: colon)...])
        switch kind {
        case "block", "staff":
            guard let key = try? IdentityKey(qualified: value) else { throw .badPayload("target '\(text.prefix(80))': not nostr:<hex> or mesh:<hex>") }
            self = kind == "block" ? .block(key) : .staff(key)
        case "word":
            self = try .word(term: value)
        case "release":
            guard (try? Hex.decode(value, expectedCount: 32)) != nil, value == value.lowercased() else {
                throw .badPayload("release target is not a 64-hex event id")
            }
            self = .release(value)
        case "stage":
            guard !value.isEmpty, value.utf8.count <= Limits.maxStageBytes else { throw .badPayload("a stage name must be 1–\(Limits.maxStageBytes) bytes") }
            self = .stage(value)
        default:
            throw .badPayload("target kind '\(kind.prefix(20))' is not block, staff, word, release or stage")
        }
    }

    /// A keyword target: 1–``Limits/maxWordBytes`` bytes, lowercased.
    public static func word(term: String) throws(SiteRecordError) -> SiteTarget {
        let lowered = term.lowercased()
        guard !lowered.isEmpty, lowered.utf8.count <= Limits.maxWordBytes else {
            throw .badPayload("a word must be 1–\(Limits.maxWordBytes) bytes")
        }
        return .word(lowered)
    }

    /// The record a sender action of the console or `identities` makes: block/unblock, allow/unallow (staff); the
    /// other verbs (verify, notes) stay this stage's.
    public static func senderAction(_ verb: String, key: IdentityKey) -> (SiteTarget, Bool)? {
        switch verb {
        case "block": (.block(key), true)
        case "unblock": (.block(key), false)
        case "allow": (.staff(key), true)
        case "unallow": (.staff(key), false)
        default: nil
        }
    }

    public static func < (a: SiteTarget, b: SiteTarget) -> Bool { a.description < b.description }
}

/// Why a Nostr event is not a site record this bridge applies. Each names its reason; ``SiteLedger`` counts them by
/// ``SiteRecordOutcome``.
public enum SiteRecordError: Error, Equatable, Sendable, CustomStringConvertible {
    case wrongKind(Int)
    /// Signed by a key that is not one of the configured operator keys (hex of the author).
    case notOperator(String)
    /// No `s` tag naming this site, or no `d` address.
    case otherSite
    /// The content does not open with this site's key: sealed by another operator key, for another site, or damaged.
    case unreadable
    /// Opened, but the payload is not a record (its reason).
    case badPayload(String)
    /// The payload's target is not the one its `d` address names (a record copied onto another address).
    case addressMismatch

    public var description: String {
        switch self {
        case .wrongKind(let kind): "kind \(kind) is not a site record (kind \(SiteRecord.kind))"
        case .notOperator(let author): "site record author \(author.prefix(8))… is not a configured operator key"
        case .otherSite: "not a record of this site"
        case .unreadable: "site record does not open with this site's key"
        case .badPayload(let reason): "site record payload: \(reason)"
        case .addressMismatch: "site record target is not the one its d tag addresses"
        }
    }
}

/// The secret every stage of a site derives from the operator key it holds: it seals the records' content and
/// makes their addresses. Never logged, never written anywhere (it is derived again at each start).
public struct SiteKey: Sendable {
    let bytes: [UInt8]
    public let site: String

    /// HKDF-SHA256 of the operator secret key, salted with the record format's name, for `site`.
    public init(operatorKey: SchnorrSecretKey, site: String) throws(CryptoError) {
        bytes = try HKDFSHA256.deriveKey(
            inputKeyMaterial: operatorKey.bytes, salt: Array("bitchat-bridge site records v1".utf8), info: Array(site.utf8),
            outputByteCount: 32)
        self.site = site
    }

    /// The record's `d` tag: the site's label and a keyed hash of the target, so a relay (or anyone reading it)
    /// learns neither who is blocked or staff nor which words are denied, yet every stage finds the same address.
    public func address(_ target: SiteTarget) -> String {
        let mac = HMACSHA256.authenticationCode(key: bytes, message: Array("target \(target)".utf8))
        return "\(SiteRecord.addressPrefix)\(site):\(Hex.encode(Array(mac.prefix(16))))"
    }

    /// Sealed with a synthetic nonce (the first 12 bytes of a keyed hash of the address and the payload, as SIV
    /// modes do): no randomness to inject, and no nonce is ever used for two different payloads — two identical
    /// payloads seal alike, which tells a reader only that they are equal.
    func seal(_ plaintext: [UInt8], address: String) throws(CryptoError) -> String {
        let nonce = Array(HMACSHA256.authenticationCode(key: bytes, message: Array("nonce \(address) ".utf8) + plaintext).prefix(ChaChaPoly.nonceByteCount))
        return Base64.encode(nonce + (try ChaChaPoly.seal(plaintext, key: bytes, nonce: nonce, authenticating: Array(address.utf8))))
    }

    func open(_ content: String, address: String) -> [UInt8]? {
        guard let sealed = try? Base64.decode(content), sealed.count > ChaChaPoly.nonceByteCount + ChaChaPoly.tagByteCount else { return nil }
        let nonce = Array(sealed.prefix(ChaChaPoly.nonceByteCount))
        return try? ChaChaPoly.open(Array(sealed.dropFirst(ChaChaPoly.nonceByteCount)), key: bytes, nonce: nonce, authenticating: Array(address.utf8))
    }
}

/// One moderation action of a site, as every stage of it applies it (issue 35).
///
/// Wire form (docs/site.md): a NIP-78 application-data event, kind ``kind`` (30078, parameterised-replaceable: relays
/// keep the newest per operator key and address), with
/// - `["d", "bitchat-bridge/site/<site>:<32 hex>"]` — the target's address (``SiteKey/address(_:)``);
/// - `["s", <site>]` — the site, for the subscription's filter;
/// - content: base64 of nonce (12) ‖ ChaCha20-Poly1305 of the payload under the site key, the `d` tag as associated
///   data; the payload is `{"v":1,"target":"block:nostr:<hex>","on":true,"by":"session:ana","bridge":"stage-a"}`.
/// The newest record of a target wins: the higher `created_at`, equal times broken by the lower event id — NIP-01's
/// rule for replaceable events, so the record a relay keeps is the record every stage applies.
public struct SiteRecord: Sendable, Equatable {
    public static let kind = 30078
    public static let addressPrefix = "bitchat-bridge/site/"

    public enum Tag {
        public static let address = "d"
        public static let site = "s"
    }

    public let target: SiteTarget
    /// Set (block, staff, word in force, released) or cleared (unblocked, unallowed, word removed, release withdrawn).
    public let on: Bool
    /// Who acted, as the audit names them (`session:ana`, `bearer:operator`, `cli:root`).
    public let by: String
    /// The stage where it was made (the bridge's name).
    public let bridge: String
    public let createdAt: Int64
    public let eventID: EventID
    /// A stage's heartbeat: its figures (`relays`, `mesh_peers`, `queue`, `courier_held`, `courier_pending`); nil for
    /// every other record.
    public let status: JSONValue?

    public init(target: SiteTarget, on: Bool, by: String, bridge: String, createdAt: Int64, eventID: EventID, status: JSONValue? = nil) {
        self.target = target
        self.on = on
        self.by = by
        self.bridge = bridge
        self.createdAt = createdAt
        self.eventID = eventID
        self.status = status
    }

    /// Reads a verified `event` as a record of `key`'s site by one of `operators`.
    public init(event: NostrEvent, key: SiteKey, operators: Set<XOnlyPublicKey>) throws(SiteRecordError) {
        guard event.kind == Self.kind else { throw .wrongKind(event.kind) }
        guard operators.contains(event.pubkey) else { throw .notOperator(event.pubkey.hex) }
        guard let site = event.firstTag(Tag.site), site.count >= 2, site[1] == key.site,
            let address = event.firstTag(Tag.address), address.count >= 2,
            address[1].hasPrefix("\(Self.addressPrefix)\(key.site):")
        else { throw .otherSite }
        guard let plaintext = key.open(event.content, address: address[1]) else { throw .unreadable }
        guard let payload = try? JSONParser().parse(plaintext), case .object = payload else { throw .badPayload("not a JSON object") }
        guard case .integer(1)? = payload["v"] else { throw .badPayload("version is not 1") }
        guard case .string(let targetText)? = payload["target"] else { throw .badPayload("no target") }
        guard case .bool(let on)? = payload["on"] else { throw .badPayload("no on") }
        guard case .string(let by)? = payload["by"], case .string(let bridge)? = payload["bridge"] else { throw .badPayload("no by or bridge") }
        let target = try SiteTarget(parsing: targetText)
        guard key.address(target) == address[1] else { throw .addressMismatch }
        var status: JSONValue?
        if case .stage = target, case .object? = payload["status"] { status = payload["status"] }
        self.init(target: target, on: on, by: by, bridge: bridge, createdAt: event.createdAt, eventID: event.id, status: status)
    }

    /// The signed event for an action.
    public static func event(
        target: SiteTarget, on: Bool, by: String, bridge: String, createdAt: Int64, key: SiteKey, author: SchnorrSecretKey,
        status: JSONValue? = nil
    ) throws(CryptoError) -> NostrEvent {
        let address = key.address(target)
        var members: [(String, JSONValue)] = [
            ("v", .integer(1)), ("target", .string(target.description)), ("on", .bool(on)), ("by", .string(by)), ("bridge", .string(bridge)),
        ]
        if let status { members.append(("status", status)) }
        let payload = JSONValue.object(members)
        let content = try key.seal(Array(JSONWriter.compact(payload).utf8), address: address)
        let tags = [[Tag.address, address], [Tag.site, key.site]]
        return try UnsignedEvent(pubkey: author.publicKey, createdAt: createdAt, kind: kind, tags: tags, content: content).signed(with: author)
    }

    /// The record as the console's audit names an action: `block`/`unblock`, `allow`/`unallow`, `denylist add`/`denylist
    /// remove`, `release`/`release withdrawn`, and what it was on.
    public var audit: (action: String, target: String) {
        switch target {
        case .block(let key): (on ? "block" : "unblock", key.qualified)
        case .staff(let key): (on ? "allow" : "unallow", key.qualified)
        case .word(let term): (on ? "denylist add" : "denylist remove", "keyword:\(term)")
        case .release(let id): (on ? "release" : "release withdrawn", id)
        case .stage(let name): ("heartbeat", name)
        }
    }

    /// Whether `a` replaces `b` (NIP-01's order for replaceable events).
    public static func isNewer(_ a: (createdAt: Int64, id: EventID), than b: (createdAt: Int64, id: EventID)) -> Bool {
        a.createdAt > b.createdAt || (a.createdAt == b.createdAt && a.id.hex < b.id.hex)
    }
}
