public import BotSupport
import BotCrypto

/// A message from a relay (NIP-01, NIP-20 `OK`, NIP-42 `AUTH`), parsed strictly.
///
/// ```
/// ["EVENT", <sub id>, <event object>]
/// ["OK", <event id hex>, <true|false>, <message>]      message optional (some relays omit it)
/// ["EOSE", <sub id>]
/// ["CLOSED", <sub id>, <message>]                        message optional
/// ["NOTICE", <message>]
/// ["AUTH", <challenge>]
/// ```
public enum RelayMessage: Equatable, Sendable {
    case event(subscription: String, event: UnverifiedEvent)
    /// `eventID` stays text: nostr-relay answers a rejected event with an empty id.
    case ok(eventID: String, accepted: Bool, message: String)
    case endOfStoredEvents(subscription: String)
    case closed(subscription: String, message: String)
    case notice(String)
    case auth(challenge: String)

    /// The frame gate of NOSTR-GEO §5.5 step 1.
    public enum Limits {
        /// Largest text frame parsed; iOS drops larger frames before JSON (256 KiB).
        public static let maxFrameBytes = 256 << 10
        /// Deepest nesting a relay message needs is 4 (`[ "EVENT", sub, { tags: [[…]] } ]`); 8 leaves room.
        public static let maxDepth = 8
        /// Longest verb we echo into an error name, so hostile verbs cannot bloat logs.
        public static let maxReportedVerbBytes = 32
    }

    /// Parses one text frame. Every rejection is a named ``NostrError``.
    public static func parse(_ frame: [UInt8]) throws(NostrError) -> RelayMessage {
        guard frame.count <= Limits.maxFrameBytes else { throw .frameTooLarge(bytes: frame.count) }
        if let event = frame.withUnsafeBufferPointer({ EventFrameFastPath.parse($0) }) { return event }
        return try parseGeneral(frame)
    }

    /// The strict general parser alone (the reference the fast path is tested against).
    static func parseGeneral(_ frame: [UInt8]) throws(NostrError) -> RelayMessage {
        guard frame.count <= Limits.maxFrameBytes else { throw .frameTooLarge(bytes: frame.count) }
        let value: JSONValue
        do {
            value = try JSONParser(limits: .init(maxBytes: Limits.maxFrameBytes, maxDepth: Limits.maxDepth)).parse(frame)
        } catch {
            throw .invalidJSON(error)
        }
        return try parse(value)
    }

    public static func parse(_ frame: String) throws(NostrError) -> RelayMessage {
        try parse(Array(frame.utf8))
    }

    static func parse(_ value: JSONValue) throws(NostrError) -> RelayMessage {
        guard case .array(let elements) = value, case .string(let verb)? = elements.first else {
            throw .notAMessageArray
        }
        func string(_ index: Int, _ field: String) throws(NostrError) -> String {
            guard case .string(let text) = elements[index] else { throw .wrongType(field: field) }
            return text
        }
        let count = elements.count
        switch verb {
        case "EVENT":
            guard count == 3 else { throw .wrongArity(verb: verb, count: count) }
            return .event(subscription: try string(1, "subscription id"), event: try UnverifiedEvent(json: elements[2]))
        case "OK":
            guard count == 3 || count == 4 else { throw .wrongArity(verb: verb, count: count) }
            guard case .bool(let accepted) = elements[2] else { throw .wrongType(field: "OK accepted") }
            return .ok(eventID: try string(1, "OK event id"), accepted: accepted,
                       message: count == 4 ? try string(3, "OK message") : "")
        case "EOSE":
            guard count == 2 else { throw .wrongArity(verb: verb, count: count) }
            return .endOfStoredEvents(subscription: try string(1, "subscription id"))
        case "CLOSED":
            guard count == 2 || count == 3 else { throw .wrongArity(verb: verb, count: count) }
            return .closed(subscription: try string(1, "subscription id"),
                           message: count == 3 ? try string(2, "CLOSED message") : "")
        case "NOTICE":
            guard count == 2 else { throw .wrongArity(verb: verb, count: count) }
            return .notice(try string(1, "NOTICE message"))
        case "AUTH":
            guard count == 2 else { throw .wrongArity(verb: verb, count: count) }
            return .auth(challenge: try string(1, "AUTH challenge"))
        default:
            throw .unknownVerb(String(decoding: verb.utf8.prefix(Limits.maxReportedVerbBytes), as: UTF8.self))
        }
    }
}

/// A message to a relay.
public enum ClientMessage: Equatable, Sendable {
    case event(NostrEvent)
    case request(subscription: String, filters: [NostrFilter])
    case close(subscription: String)
    /// NIP-42: a signed kind-22242 event answering a challenge.
    case auth(NostrEvent)

    /// The compact JSON text sent as one WebSocket text frame.
    public var text: String {
        switch self {
        case .event(let event): JSONWriter.compact(.array([.string("EVENT"), event.jsonValue]))
        case .request(let subscription, let filters):
            JSONWriter.compact(.array([.string("REQ"), .string(subscription)] + filters.map(\.jsonValue)))
        case .close(let subscription): JSONWriter.compact(.array([.string("CLOSE"), .string(subscription)]))
        case .auth(let event): JSONWriter.compact(.array([.string("AUTH"), event.jsonValue]))
        }
    }
}

/// A NIP-01 subscription filter. Serialised with sorted keys, as the iOS encoder does (NOSTR-GEO §13.2).
public struct NostrFilter: Equatable, Sendable {
    public var ids: [String]?
    public var authors: [String]?
    public var kinds: [Int]?
    /// Tag filters by letter: `["g": ["u4pruy"]]` becomes `"#g":["u4pruy"]`.
    public var tags: [String: [String]]
    public var since: Int64?
    public var until: Int64?
    public var limit: Int?

    public init(
        ids: [String]? = nil, authors: [String]? = nil, kinds: [Int]? = nil, tags: [String: [String]] = [:],
        since: Int64? = nil, until: Int64? = nil, limit: Int? = nil
    ) {
        self.ids = ids
        self.authors = authors
        self.kinds = kinds
        self.tags = tags
        self.since = since
        self.until = until
        self.limit = limit
    }

    /// The geohash channel filter phones use (NOSTR-GEO §5.4): kinds 20000/20001, `#g` = the one
    /// geohash, look back one hour, limit 200.
    public static func geohashChannel(_ geohash: String, now: Int64) -> NostrFilter {
        NostrFilter(kinds: [NostrKind.ephemeralChat, NostrKind.presence], tags: ["g": [geohash]],
                    since: now - 3600, limit: 200)
    }

    /// The bridge rendezvous filter (NOSTR-GEO §8.6): `#r` = the cell and its 8 neighbours, 15 min back.
    public static func rendezvous(cells: [String], now: Int64) -> NostrFilter {
        NostrFilter(kinds: [NostrKind.ephemeralChat, NostrKind.presence], tags: ["r": cells],
                    since: now - 900, limit: 200)
    }

    public var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = []
        for (letter, values) in tags { members.append(("#" + letter, .array(values.map { .string($0) }))) }
        if let ids { members.append(("ids", .array(ids.map { .string($0) }))) }
        if let authors { members.append(("authors", .array(authors.map { .string($0) }))) }
        if let kinds { members.append(("kinds", .array(kinds.map { .integer(Int64($0)) }))) }
        if let since { members.append(("since", .integer(since))) }
        if let until { members.append(("until", .integer(until))) }
        if let limit { members.append(("limit", .integer(Int64(limit)))) }
        // Byte-wise key order, like the phones' sorted-keys encoder ("#g" < "authors" < "kinds" < …).
        members.sort { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) }
        return .object(members)
    }

    /// True when `event` satisfies every present condition (client-side re-check, as Android does).
    public func matches(_ event: NostrEvent) -> Bool {
        if let ids, !ids.contains(event.id.hex) { return false }
        if let authors, !authors.contains(event.pubkey.hex) { return false }
        if let kinds, !kinds.contains(event.kind) { return false }
        if let since, event.createdAt < since { return false }
        if let until, event.createdAt > until { return false }
        for (letter, values) in tags {
            let hit = event.tags.contains { $0.count >= 2 && $0[0] == letter && values.contains($0[1]) }
            if !hit { return false }
        }
        return true
    }
}
