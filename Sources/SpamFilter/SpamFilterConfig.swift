public import BotSupport

/// Every tunable of the spam filter (shared/spec/SPAM-FILTER.md §2), with the spec's defaults.
///
/// Loadable from the bridge's config file (the `spam` object) through ``init(json:)``; every key is
/// optional and falls back to its default, unknown keys are rejected so a typo never silently
/// leaves a default in force.
public struct SpamFilterConfig: Sendable, Equatable {
    /// A token bucket: `capacity` tokens, refilled continuously at `refillTokens` per `refillSeconds`.
    /// All three are taken in thousandths (``BucketScale``: the buckets run on exact integers).
    public struct Bucket: Sendable, Equatable {
        public var capacity: Double
        public var refillTokens: Double
        public var refillSeconds: Double

        public init(capacity: Double, refillTokens: Double, refillSeconds: Double) {
            self.capacity = capacity
            self.refillTokens = refillTokens
            self.refillSeconds = refillSeconds
        }
    }

    /// Bounds on the tunables themselves: values outside them are configuration errors.
    public enum Limits {
        /// More stored texts make every judgment slower and the index larger; 10,000 is far above any useful window.
        public static let maxStoredTexts = 10_000
        /// The sender table is memory: 1,000,000 senders of bucket history is already hundreds of MB.
        public static let maxTrackedSenders = 1_000_000
        /// Repeat window and clamp window longer than a day would keep per-sender history unbounded in practice.
        public static let maxWindowSeconds = 86_400.0
        /// Bucket capacities and refills: a million tokens is far beyond any message or character burst
        /// (a message is at most 16,000 bytes), and keeps a bucket's exact figures below 2^57 (``BucketScale``).
        public static let maxBucketTokens: Int64 = 1_000_000
        /// Bucket figures have at most this many decimals (thousandths: a millisecond of refill time), so
        /// the buckets run on exact integers and a decimal such as 0.1 means exactly a tenth.
        public static let bucketDecimals = 3
    }

    public var enabled = true
    /// Message bucket: a burst of 6, then 1 every 10 s.
    public var messageBucket = Bucket(capacity: 6, refillTokens: 1, refillSeconds: 10)
    /// Character bucket: 1200 normalised scalars per minute.
    public var characterBucket = Bucket(capacity: 1200, refillTokens: 1200, refillSeconds: 60)
    /// Link bucket: 2 links per minute.
    public var linkBucket = Bucket(capacity: 2, refillTokens: 2, refillSeconds: 60)
    /// Two texts are near-copies when their similarity (§5) is at least this.
    public var nearCopyThreshold = 0.80
    /// The repeat and cross-user rules look this far back (and forward) in message time, seconds.
    public var repeatWindowSeconds = 600.0
    /// A sender's message is hidden when this many of their stored messages in the window are near-copies of it.
    public var repeatedMessagePriorCopies = 2
    /// The cross-user rule applies to normalised texts at least this long.
    public var crossUserMinLength = 16
    /// A message is hidden when at least this many other senders already posted a near-copy in the window.
    public var crossUserOtherSenders = 3
    /// The repeated-characters rule applies to normalised texts at least this long.
    public var repeatedCharactersMinLength = 32
    /// …and fires when the autocorrelation reaches this.
    public var autocorrelationThreshold = 0.85
    /// Message timestamps are clamped to [now − this, now], seconds.
    public var timestampClampSeconds = 3600.0
    /// Most recent texts kept for the similarity rules.
    public var storedTexts = 200
    /// The cross-user scan (newest first) stops after this many comparisons…
    ///
    /// 200, the default `stored_texts`, so by default the scan is exhaustive: the spec's 64 comparisons
    /// or 8 alignments (sized for a phone port about 40× slower) let 8 crafted look-alikes from one extra
    /// identity — stored even when the rate rules hide them — use the scan up, and the next copies of a
    /// swarm passed. Exhaustive costs no new worst case: the own-sender scan was never capped, and the two
    /// scans together compare each stored text at most once (at most `stored_texts` pairs per judgment).
    /// The caps still bound the scan when `stored_texts` is raised above them.
    public var crossUserScanMaxComparisons = 200
    /// …or this many full alignments (200, as above: an alignment costs less than the diagonal count before it).
    public var crossUserScanMaxAlignments = 200
    /// Senders tracked; on overflow the least recently active are evicted down to 3/4 of this.
    public var maxTrackedSenders = 4096
    /// When true, verdicts are computed and logged but nothing is hidden.
    public var shadowMode = false

    public init() {}
}

/// Why a spam configuration was rejected; `field` is the dotted JSON path (`message_bucket.capacity`).
public enum SpamConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    case notAnObject(field: String)
    case unknownField(field: String)
    case wrongType(field: String, expected: String)
    case outOfRange(field: String, reason: String)

    public var description: String {
        switch self {
        case .notAnObject(let field): "spam config: '\(field)' must be a JSON object"
        case .unknownField(let field): "spam config: unknown field '\(field)'"
        case .wrongType(let field, let expected): "spam config: '\(field)' must be \(expected)"
        case .outOfRange(let field, let reason): "spam config: '\(field)' \(reason)"
        }
    }
}

extension SpamFilterConfig {
    /// Reads a configuration object (the `spam` key of the bridge config). Missing keys keep their default.
    public init(json: JSONValue, field: String = "spam") throws(SpamConfigError) {
        self.init()
        guard let members = json.objectValue else { throw .notAnObject(field: field) }
        for (key, value) in members {
            let path = field + "." + key
            switch key {
            case "enabled": enabled = try Self.bool(value, path)
            case "shadow_mode": shadowMode = try Self.bool(value, path)
            case "message_bucket": messageBucket = try Self.bucket(value, path, default: messageBucket)
            case "character_bucket": characterBucket = try Self.bucket(value, path, default: characterBucket)
            case "link_bucket": linkBucket = try Self.bucket(value, path, default: linkBucket)
            case "near_copy_threshold":
                nearCopyThreshold = try Self.number(value, path, in: 0.5...1.0, "must be between 0.5 and 1.0")
            case "repeat_window_seconds":
                repeatWindowSeconds = try Self.number(value, path, in: 1...Limits.maxWindowSeconds, "must be 1 s … 1 day")
            case "repeated_message_prior_copies":
                repeatedMessagePriorCopies = try Self.integer(value, path, in: 1...1000)
            case "cross_user_min_length": crossUserMinLength = try Self.integer(value, path, in: 1...100_000)
            case "cross_user_other_senders": crossUserOtherSenders = try Self.integer(value, path, in: 1...1000)
            case "repeated_characters_min_length":
                repeatedCharactersMinLength = try Self.integer(value, path, in: 2...100_000)
            case "autocorrelation_threshold":
                autocorrelationThreshold = try Self.number(value, path, in: 0.01...1.0, "must be between 0.01 and 1.0")
            case "timestamp_clamp_seconds":
                timestampClampSeconds = try Self.number(value, path, in: 1...Limits.maxWindowSeconds, "must be 1 s … 1 day")
            case "stored_texts": storedTexts = try Self.integer(value, path, in: 1...Limits.maxStoredTexts)
            case "cross_user_scan_max_comparisons":
                crossUserScanMaxComparisons = try Self.integer(value, path, in: 1...Limits.maxStoredTexts)
            case "cross_user_scan_max_alignments":
                crossUserScanMaxAlignments = try Self.integer(value, path, in: 1...Limits.maxStoredTexts)
            case "max_tracked_senders": maxTrackedSenders = try Self.integer(value, path, in: 4...Limits.maxTrackedSenders)
            default: throw .unknownField(field: path)
            }
        }
    }

    /// The configuration as JSON (every key, so an operator sees the effective values).
    public var jsonValue: JSONValue {
        func bucket(_ b: Bucket) -> JSONValue {
            .object([
                ("capacity", .double(b.capacity)), ("refill_tokens", .double(b.refillTokens)),
                ("refill_seconds", .double(b.refillSeconds)),
            ])
        }
        return .object([
            ("enabled", .bool(enabled)), ("shadow_mode", .bool(shadowMode)),
            ("message_bucket", bucket(messageBucket)), ("character_bucket", bucket(characterBucket)),
            ("link_bucket", bucket(linkBucket)), ("near_copy_threshold", .double(nearCopyThreshold)),
            ("repeat_window_seconds", .double(repeatWindowSeconds)),
            ("repeated_message_prior_copies", .integer(Int64(repeatedMessagePriorCopies))),
            ("cross_user_min_length", .integer(Int64(crossUserMinLength))),
            ("cross_user_other_senders", .integer(Int64(crossUserOtherSenders))),
            ("repeated_characters_min_length", .integer(Int64(repeatedCharactersMinLength))),
            ("autocorrelation_threshold", .double(autocorrelationThreshold)),
            ("timestamp_clamp_seconds", .double(timestampClampSeconds)),
            ("stored_texts", .integer(Int64(storedTexts))),
            ("cross_user_scan_max_comparisons", .integer(Int64(crossUserScanMaxComparisons))),
            ("cross_user_scan_max_alignments", .integer(Int64(crossUserScanMaxAlignments))),
            ("max_tracked_senders", .integer(Int64(maxTrackedSenders))),
        ])
    }

    private static func bool(_ value: JSONValue, _ path: String) throws(SpamConfigError) -> Bool {
        guard let b = value.boolValue else { throw .wrongType(field: path, expected: "true or false") }
        return b
    }

    private static func number(
        _ value: JSONValue, _ path: String, in range: ClosedRange<Double>, _ reason: String
    ) throws(SpamConfigError) -> Double {
        guard let d = value.numberValue, d.isFinite else { throw .wrongType(field: path, expected: "a number") }
        guard range.contains(d) else { throw .outOfRange(field: path, reason: reason) }
        return d
    }

    private static func integer(_ value: JSONValue, _ path: String, in range: ClosedRange<Int>) throws(SpamConfigError) -> Int {
        guard let i = value.integerValue else { throw .wrongType(field: path, expected: "an integer") }
        guard i >= Int64(range.lowerBound), i <= Int64(range.upperBound) else {
            throw .outOfRange(field: path, reason: "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return Int(i)
    }

    private static func bucket(_ value: JSONValue, _ path: String, default base: Bucket) throws(SpamConfigError) -> Bucket {
        guard let members = value.objectValue else { throw .notAnObject(field: path) }
        var bucket = base
        let tokens = Double(Limits.maxBucketTokens)
        for (key, member) in members {
            let field = path + "." + key
            switch key {
            case "capacity":
                bucket.capacity = try thousandths(member, field, in: 1...tokens, "must be between 1 and 1e6")
            case "refill_tokens":
                bucket.refillTokens = try thousandths(member, field, in: 0.001...tokens, "must be between 0.001 and 1e6")
            case "refill_seconds":
                bucket.refillSeconds = try thousandths(member, field, in: 0.001...Limits.maxWindowSeconds, "must be 1 ms … 1 day")
            default: throw .unknownField(field: field)
            }
        }
        return bucket
    }

    /// A number in `range` that is a whole number of thousandths (``Limits/bucketDecimals``): the nearest
    /// double to `k / 1000` for an integer `k`, which is what the decimal text `k / 1000` parses to.
    private static func thousandths(
        _ value: JSONValue, _ path: String, in range: ClosedRange<Double>, _ reason: String
    ) throws(SpamConfigError) -> Double {
        let number = try number(value, path, in: range, reason)
        guard (number * 1_000).rounded() / 1_000 == number else {
            throw .outOfRange(field: path, reason: "must have at most \(Limits.bucketDecimals) decimals")
        }
        return number
    }
}
