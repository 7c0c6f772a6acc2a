public import BotSupport

/// One thing the bridge did with a message, for the console's live view: judged (passed, hidden, would-hide)
/// or crossed (downlinked to the mesh, published to Nostr). Made by the coordinator from the router's
/// judgement journal and its actions; handed to ``BridgeCoordinator/Dependencies/activity``.
public struct BridgeActivity: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// The judge let it through (it now meets the loop rules and budgets).
        case passed
        /// The judge hid it.
        case hidden
        /// Shadow mode: the judge would have hidden it; it went on.
        case wouldHide = "would_hide"
        /// A carrier or mirror left for the mesh.
        case downlinked
        /// An event left for the relays.
        case published
    }

    /// Unix seconds.
    public var at: Double
    public var kind: Kind
    public var direction: BridgeRouter.Direction
    /// The geohash the bridge serves, or `mesh` for the radio side's own text.
    public var channel: String
    public var sender: String
    public var displayName: String?
    /// Nostr event id hex, or the mesh stable ID.
    public var messageID: String
    /// The text (nil when the operator keeps no text, `modlog.log_text` = false, or for crossings).
    public var text: String?
    /// The hiding rule's label (`blocked`, `crossUserCopy`, …) for hidden / would-hide.
    public var rule: String?
    /// The figures behind a spam verdict (SPAM-FILTER §7), `null` otherwise.
    public var figures: JSONValue
    /// For a crossing onto the mesh, the form it took: `carrier` (on `channel`, the level it was posted in) or
    /// `mirror` (the plain-text line Android phones show).
    public var form: String?

    public init(
        at: Double, kind: Kind, direction: BridgeRouter.Direction, channel: String, sender: String, displayName: String?,
        messageID: String, text: String?, rule: String?, figures: JSONValue = .null, form: String? = nil
    ) {
        self.form = form
        self.at = at
        self.kind = kind
        self.direction = direction
        self.channel = channel
        self.sender = sender
        self.displayName = displayName
        self.messageID = messageID
        self.text = text
        self.rule = rule
        self.figures = figures
    }

    public var jsonValue: JSONValue {
        .object([
            ("at", .double(at)), ("kind", .string(kind.rawValue)), ("direction", .string(direction.rawValue)),
            ("channel", .string(channel)), ("sender", .string(sender)), ("display_name", displayName.map(JSONValue.string) ?? .null),
            ("message_id", .string(messageID)), ("text", text.map(JSONValue.string) ?? .null),
            ("rule", rule.map(JSONValue.string) ?? .null), ("figures", figures), ("form", form.map(JSONValue.string) ?? .null),
        ])
    }
}
