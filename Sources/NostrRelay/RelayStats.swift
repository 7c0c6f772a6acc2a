public import BotSupport
public import Nostr

/// Why the pool dropped an inbound frame or event. The raw value is the metric label (`reason`) and the
/// `drop.reason` of the log line; malformed and invalid reasons are exactly ``NostrError/name``.
public enum InboundDrop: String, CounterKey, CaseIterable {
    // Malformed frames: the frame gate and the event parse (NOSTR-GEO §5.5 steps 1–2).
    case frameTooLarge = "frame_too_large"
    case invalidJSON = "invalid_json"
    case notAMessageArray = "not_a_message_array"
    case unknownVerb = "unknown_verb"
    case wrongArity = "wrong_arity"
    case wrongType = "wrong_type"
    case missingField = "missing_field"
    case outOfRange = "out_of_range"
    case invalidHex = "invalid_hex"
    case tooManyTags = "too_many_tags"
    case tooManyTagElements = "too_many_tag_elements"
    case tagElementTooLong = "tag_element_too_long"
    // Invalid events: verification (§2.4).
    case idMismatch = "id_mismatch"
    case invalidPublicKey = "invalid_public_key"
    case badSignature = "bad_signature"
    // The relay's verification budget was spent: not the event's fault, never a strike.
    case overBudget = "over_budget"
    // Well-formed but not wanted.
    case unknownSubscription = "unknown_subscription"
    case filterMismatch = "filter_mismatch"
    /// `created_at` more than the intake window (``RelayPoolCore/Configuration/freshnessWindow``) in the past.
    case stale = "stale"
    /// `created_at` more than the intake window in the future.
    case future = "future"
    // Queues.
    /// The connection already had ``RelayPoolCore/Limits/maxPendingFrames`` frames waiting for verification.
    /// Rare: reading pauses at ``RelayPoolCore/Limits/pauseReadingAt``, so only frames lws had already read
    /// can arrive beyond it.
    case verificationQueueFull = "verification_queue_full"
    /// The connection ended (or was closed) while the event waited for its verification.
    case connectionEnded = "connection_ended"
    case authSigningFailed = "auth_signing_failed"
    /// An error the parser and the verifier are not documented to throw (none today; counted, not lost).
    case unexpected = "unexpected"

    public enum Category: String, Sendable, CaseIterable {
        /// The frame or event did not parse.
        case malformed
        /// Parsed, but the id or the signature is wrong.
        case invalid
        /// The relay's verification budget was spent.
        case budget
        /// Valid, but not for us (subscription, filter, freshness).
        case unwanted
        /// A bound of the pool's own queues.
        case queue
    }

    public var category: Category {
        switch self {
        case .frameTooLarge, .invalidJSON, .notAMessageArray, .unknownVerb, .wrongArity, .wrongType, .missingField,
             .outOfRange, .invalidHex, .tooManyTags, .tooManyTagElements, .tagElementTooLong:
            .malformed
        case .idMismatch, .invalidPublicKey, .badSignature: .invalid
        case .overBudget: .budget
        case .unknownSubscription, .filterMismatch, .stale, .future: .unwanted
        case .verificationQueueFull, .connectionEnded, .authSigningFailed, .unexpected: .queue
        }
    }

    /// Malformed frames and invalid events are the relay's fault: they count toward its misbehaviour
    /// allowance (``RelayPoolCore/Limits/invalidFrameAllowance``).
    public var isStrike: Bool { category == .malformed || category == .invalid }

    public init(_ error: NostrError) {
        switch error {
        case .frameTooLarge: self = .frameTooLarge
        case .invalidJSON: self = .invalidJSON
        case .notAMessageArray: self = .notAMessageArray
        case .unknownVerb: self = .unknownVerb
        case .wrongArity: self = .wrongArity
        case .wrongType: self = .wrongType
        case .missingField: self = .missingField
        case .outOfRange: self = .outOfRange
        case .invalidHex: self = .invalidHex
        case .tooManyTags: self = .tooManyTags
        case .tooManyTagElements: self = .tooManyTagElements
        case .tagElementTooLong: self = .tagElementTooLong
        case .idMismatch: self = .idMismatch
        case .invalidPublicKey: self = .invalidPublicKey
        case .badSignature: self = .badSignature
        case .overBudget: self = .overBudget
        case .invalidTarget, .miningCancelled: self = .unexpected
        }
    }
}

/// How an attempt or a connection ended, as counted in ``RelayStats`` (raw value = metric label).
public enum ConnectionEnd: String, CounterKey, CaseIterable {
    /// The name did not resolve.
    case dns
    /// Refused, reset, TLS or handshake failure (including a server that never answered the upgrade).
    case connect
    /// The pool's connect timeout passed first.
    case timeout
    /// Closed by the peer or the network.
    case closed
    /// Closed by us (stop, removal from the relay list).
    case closedLocally = "closed_locally"
    /// Closed by the pool: no frame and no PONG within the answer window (``RelayPoolCore/Liveness``).
    case unanswered
    /// Closed by the pool: the relay used up its misbehaviour allowance.
    case misbehaving
}

/// The machine-readable prefix of a relay's `OK false` or `CLOSED` message (NIP-01), so a relay cannot
/// grow the counters with free text; raw value = metric label.
public enum RelayReason: String, CounterKey, CaseIterable {
    case duplicate, pow, blocked, invalid, restricted, mute, error, unsupported
    case rateLimited = "rate-limited"
    case authRequired = "auth-required"
    /// No message at all.
    case none = "(none)"
    /// A prefix NIP-01 does not define, or free text.
    case other

    public init(message: String) {
        guard !message.isEmpty else {
            self = .none
            return
        }
        guard let colon = message.firstIndex(of: ":"), let known = RelayReason(rawValue: String(message[..<colon])),
            known != .none, known != .other
        else {
            self = .other
            return
        }
        self = known
    }
}

/// Per-relay counters (NOSTR-GEO §15 q1: log and count `OK false` / `CLOSED` reasons per relay). Counters
/// only grow while the relay stays in the pool; a relay removed from the list takes its counters with it.
public struct RelayStats: Sendable, Equatable {
    public var connects = 0
    public var disconnects = 0
    /// Attempts that never came up, by how they ended.
    public var failures = Tally<ConnectionEnd>()
    /// Open connections that ended, by how.
    public var losses = Tally<ConnectionEnd>()
    /// The reason of the most recent failed attempt or lost connection, for status output.
    public var lastFailure: String?
    /// Text frames received (valid or not), and PONGs: what proves the relay alive.
    public var framesReceived = 0
    /// EVENT frames that parsed, before any check (freshness, dedup, budget, signature): what the relay sent.
    public var eventsReceived = 0
    public var pongs = 0
    public var okAccepted = 0
    public var okRejected = Tally<RelayReason>()
    public var closed = Tally<RelayReason>()
    public var notices = 0
    /// NOTICE frames not reported (logged, streamed) because the relay exceeded the notice allowance.
    public var noticesSuppressed = 0
    public var authAnswered = 0
    /// Events and subscriptions re-sent after a successful NIP-42 AUTH (they had met `auth-required`).
    public var authRetried = 0
    public var authIgnored = 0
    /// The relay's clock minus ours, in seconds, read from the `Date` header of its last upgrade answer (1 s
    /// resolution, plus the round trip); nil when it sent none. Phones drop events outside ±900 s of their clocks.
    public var clockOffset: Int64?
    /// Inbound drops by reason.
    public var drops = Tally<InboundDrop>()
    public var duplicates = 0
    /// EOSE frames received (every REQ the relay accepted, including replays).
    public var eoseReceived = 0
    /// Subscriptions whose EOSE this relay had not sent when the 10 s fallback fired.
    public var eoseTimeouts = 0
    /// Further pages a trusted subscription's backfill asked this relay for (``BackfillPage``).
    public var backfillPages = 0
    public var delivered = 0
    public var published = 0
    /// Events evicted from the offline publish queue.
    public var queueDropped = 0
    /// Times reading was paused because the connection's window filled (back-pressure, nothing lost).
    public var readPauses = 0
    /// This relay's verification outcomes (its own budget).
    public var verification = EventVerifier.Counters()

    /// Drops of one category.
    public func drops(_ category: InboundDrop.Category) -> Int {
        drops.counts.reduce(0) { $0 + ($1.key.category == category ? $1.value : 0) }
    }
}
