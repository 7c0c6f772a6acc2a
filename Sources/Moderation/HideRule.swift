public import BotSupport
public import SpamFilter

/// Why a message was hidden: a row of the moderation log, a metric label and the `hidden.rule` of the log line.
/// The operator's two rules hide without the filter being asked; the spam filter's six come with its figures.
public enum HideRule: CounterKey, Comparable, CaseIterable {
    /// The operator blocked the sender (policy file, `identities block`, the console, a fleet list).
    case blocked
    /// The operator's keyword/regex denylist matched the text.
    case denylist
    case spam(SpamRule)

    public var label: String {
        switch self {
        case .blocked: "blocked"
        case .denylist: "denylist"
        case .spam(let rule): rule.rawValue
        }
    }

    /// The rule with this ``label`` (what the log stores, what `--rule` and the console's filter take).
    public init?(label: String) {
        switch label {
        case "blocked": self = .blocked
        case "denylist": self = .denylist
        default:
            guard let rule = SpamRule(rawValue: label) else { return nil }
            self = .spam(rule)
        }
    }

    public static func < (a: HideRule, b: HideRule) -> Bool { a.label < b.label }

    /// Every rule: the operator's two, then the spam filter's from its own enumeration.
    public static var allCases: [HideRule] { [.blocked, .denylist] + SpamRule.allCases.map(HideRule.spam) }
}
