public import BotSupport
public import SpamFilter
import BotCrypto

/// One moderation-log record (SPAM-FILTER.md §7): a hidden message, or in shadow mode one that would
/// have been hidden, with the rule and the figures behind it.
public struct ModerationRecord: Sendable, Equatable {
    /// Row id once stored (nil before).
    public var id: Int64?
    /// When the filter judged it, Unix seconds.
    public var judgedAt: Double
    public var direction: SpamDirection
    /// The geohash of the Nostr channel, or `mesh`.
    public var channel: String
    public var senderKey: String
    public var displayName: String?
    public var messageID: String
    /// The message's own timestamp, Unix seconds (as sent, not clamped).
    public var messageTimestamp: Double
    public var rule: HideRule
    /// True when the filter ran in shadow mode (the message was forwarded).
    public var shadow: Bool
    /// The figures behind the rule (``SpamFigures/jsonValue``).
    public var figures: JSONValue
    /// The text, or nil when the operator set `log_text = false` (then only the hash is kept).
    public var text: String?
    /// Lowercase hex SHA-256 of the text's UTF-8 bytes (empty text for attachments).
    public var textSHA256: String
    /// When the operator released the message (Unix seconds), and how (`console`, `cli`); nil while it stays hidden.
    public var releasedAt: Double?
    public var releasedBy: String?

    public init(
        id: Int64? = nil, judgedAt: Double, direction: SpamDirection, channel: String, senderKey: String,
        displayName: String?, messageID: String, messageTimestamp: Double, rule: HideRule, shadow: Bool,
        figures: JSONValue, text: String?, textSHA256: String
    ) {
        self.id = id
        self.judgedAt = judgedAt
        self.direction = direction
        self.channel = channel
        self.senderKey = senderKey
        self.displayName = displayName
        self.messageID = messageID
        self.messageTimestamp = messageTimestamp
        self.rule = rule
        self.shadow = shadow
        self.figures = figures
        self.text = text
        self.textSHA256 = textSHA256
    }

    /// The record for a verdict that must be logged (hidden or would-hide); nil for any other verdict.
    public init?(
        candidate: SpamCandidate, verdict: SpamVerdict, channel: String, displayName: String?, judgedAt: Double,
        logText: Bool
    ) {
        guard verdict.isLogged, let rule = verdict.rule else { return nil }
        self.init(
            rule: .spam(rule), shadow: verdict.outcome == .wouldHide, figures: verdict.figures.jsonValue, candidate: candidate,
            channel: channel, displayName: displayName, judgedAt: judgedAt, logText: logText)
    }

    /// The record of `candidate` hidden by `rule` (or, `shadow`, that would have been), with the figures behind it.
    public init(
        rule: HideRule, shadow: Bool, figures: JSONValue, candidate: SpamCandidate, channel: String, displayName: String?,
        judgedAt: Double, logText: Bool
    ) {
        let text: String
        switch candidate.content {
        case .text(let t): text = t
        case .attachment: text = ""
        }
        self.init(
            judgedAt: judgedAt, direction: candidate.direction, channel: channel, senderKey: candidate.senderKey,
            displayName: displayName, messageID: candidate.messageID, messageTimestamp: candidate.timestamp, rule: rule,
            shadow: shadow, figures: figures, text: logText ? text : nil, textSHA256: Hex.encode(SHA256.hash(utf8: text)))
    }

    /// The record as one JSON object (the `--json` output and the log-stream line).
    public var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = []
        if let id { members.append(("id", .integer(id))) }
        members += [
            ("judged_at", .double(judgedAt)), ("direction", .string(direction.rawValue)), ("channel", .string(channel)),
            ("sender", .string(senderKey)), ("display_name", displayName.map { .string($0) } ?? .null),
            ("message_id", .string(messageID)), ("message_timestamp", .double(messageTimestamp)),
            ("rule", .string(rule.label)), ("shadow", .bool(shadow)), ("figures", figures),
            ("text", text.map { .string($0) } ?? .null), ("text_sha256", .string(textSHA256)),
            ("released_at", releasedAt.map { .double($0) } ?? .null), ("released_by", releasedBy.map { .string($0) } ?? .null),
        ]
        return .object(members)
    }
}
