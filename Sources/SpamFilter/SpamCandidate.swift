/// Which way a message would be carried if the filter lets it through.
public enum SpamDirection: String, Sendable, CaseIterable {
    case nostrToMesh = "nostr-to-mesh"
    case meshToNostr = "mesh-to-nostr"

    /// Accepts the spec's spellings: `nostr-to-mesh`, `nostr→mesh`, `nostr->mesh` (and the mesh ones).
    public init?(text: String) {
        switch text.lowercased() {
        case "nostr-to-mesh", "nostr→mesh", "nostr->mesh", "nostr": self = .nostrToMesh
        case "mesh-to-nostr", "mesh→nostr", "mesh->nostr", "mesh": self = .meshToNostr
        default: return nil
        }
    }
}

/// What a message carries, as far as the filter cares.
public enum SpamContent: Sendable, Equatable {
    /// Public chat text (judged by every rule).
    case text(String)
    /// A mesh media row (image, voice note, file): spends one message token only; its filename is not judged.
    case attachment
}

/// One message to judge: a neutral value the bridge builds from a mesh packet or a Nostr event.
public struct SpamCandidate: Sendable, Equatable {
    /// The identity the per-sender rules count against (SPAM-FILTER.md §1): Nostr pubkey hex, mesh
    /// Noise fingerprint (or peer ID hex when unverified), or a carrier deposit's event pubkey.
    public var senderKey: String
    /// Verdict cache key: the Nostr event id or mesh message id.
    public var messageID: String
    /// The message's own timestamp, Unix seconds (clamped to [now − 1 h, now] before use).
    public var timestamp: Double
    public var content: SpamContent
    public var direction: SpamDirection

    public init(senderKey: String, messageID: String, timestamp: Double, content: SpamContent, direction: SpamDirection) {
        self.senderKey = senderKey
        self.messageID = messageID
        self.timestamp = timestamp
        self.content = content
        self.direction = direction
    }
}

/// The six rules, in evaluation order (§4).
public enum SpamRule: String, Sendable, CaseIterable, Comparable {
    case messageRate
    case characterRate
    case linkRate
    case repeatedMessage
    case crossUserCopy
    case repeatedCharacters

    public static func < (a: SpamRule, b: SpamRule) -> Bool {
        allCases.firstIndex(of: a) ?? 0 < allCases.firstIndex(of: b) ?? 0
    }
}

/// A bucket's figures at the moment a spend was tried, exactly (``BucketScale``).
public struct BucketFigures: Sendable, Equatable {
    /// Units available at the (clamped) timestamp, before this spend: ``level`` × `scale.unitsPerToken`.
    public var levelUnits: Int64
    /// Tokens this message needed (whole tokens: 1 message, its normalised scalars, its links).
    public var cost: Int
    public var scale: BucketScale

    /// Tokens available before this spend (the nearest double to the exact level; the spend was
    /// accepted iff the exact level is at least ``cost``).
    public var level: Double { Double(levelUnits) / Double(scale.unitsPerToken) }
    /// Capacity in tokens.
    public var capacity: Double { scale.capacityTokens }

    /// ``level`` rounded down to `decimals` places, for display: rounding never lifts a level just below
    /// the cost to the cost, so a shown level is below the cost exactly when the bucket refused the spend.
    public func level(roundedDownTo decimals: Int) -> Double {
        var power: Int64 = 1
        for _ in 0..<decimals { power *= 10 }
        let whole = levelUnits / scale.unitsPerToken
        // The remainder is below `unitsPerToken` (< 2^37), so times 10^decimals (≤ 10^6) stays in range;
        // one division then gives the double nearest to the decimal.
        let fraction = levelUnits % scale.unitsPerToken * power / scale.unitsPerToken
        return Double(whole * power + fraction) / Double(power)
    }
}

/// The similarity rules' figures.
public struct CopyFigures: Sendable, Equatable {
    /// Near-copies found (own stored messages for the repeat rule, distinct other senders for the cross-user rule).
    public var count: Int
    /// The highest similarity among the near-copies found (0 when none).
    public var bestSimilarity: Double
    /// Message id of the best near-copy.
    public var matchedMessageID: String?
    /// Stored texts that passed the cheap pre-checks and had their diagonal upper bound computed.
    public var comparisons: Int
    /// Full alignments run (pairs whose upper bound reached the threshold).
    public var alignments: Int
    /// True when the cross-user scan stopped at its comparison or alignment cap (§2) before finishing.
    public var capped: Bool
}

/// The repeated-characters rule's figures.
public struct AutocorrelationFigures: Sendable, Equatable {
    /// `A(k)` at ``shift``: the first shift reaching the threshold when the rule fires, else the maximum.
    public var value: Double
    public var shift: Int
    /// Normalised length n.
    public var length: Int
}

/// The figures behind a verdict: every rule that ran leaves its numbers here.
public struct SpamFigures: Sendable, Equatable {
    public var normalizedLength = 0
    public var links = 0
    /// The timestamp after clamping to [now − 1 h, now].
    public var clampedTimestamp = 0.0
    public var messageBucket: BucketFigures?
    public var characterBucket: BucketFigures?
    public var linkBucket: BucketFigures?
    public var repeated: CopyFigures?
    public var crossUser: CopyFigures?
    public var autocorrelation: AutocorrelationFigures?

    public init() {}
}

/// The filter's decision about one message.
public struct SpamVerdict: Sendable, Equatable {
    public enum Outcome: String, Sendable {
        /// Forward it.
        case accepted
        /// Do not forward, do not relay; log it.
        case hidden
        /// Shadow mode: a rule fired, but the message is forwarded anyway; log it.
        case wouldHide
        /// The filter is off: not judged, not counted.
        case disabled
        /// The bridge's own message or echo: never judged.
        case exempt
    }

    public var outcome: Outcome
    /// The rule that fired (`hidden` / `wouldHide`), else nil.
    public var rule: SpamRule?
    public var figures: SpamFigures
    /// True when this verdict came from the message-id cache (nothing was spent).
    public var fromCache: Bool

    public init(outcome: Outcome, rule: SpamRule?, figures: SpamFigures, fromCache: Bool) {
        self.outcome = outcome
        self.rule = rule
        self.figures = figures
        self.fromCache = fromCache
    }

    /// Whether the bridge must drop the message.
    public var isHidden: Bool { outcome == .hidden }
    /// Whether the moderation log gets a record (hidden, or would have been in shadow mode).
    public var isLogged: Bool { outcome == .hidden || outcome == .wouldHide }
}
