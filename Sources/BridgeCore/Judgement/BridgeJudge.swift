import BotSupport
public import SpamFilter
public import Identity
public import Moderation

/// What the judge says about one candidate.
public enum Verdict: Sendable, Equatable {
    case pass
    case hide(HideRule)
}

/// A hidden message (or, in shadow mode, one that would have been hidden) for the shell to report: the log
/// line always, the moderation-log row when ``record`` is set. Produced by ``BridgeJudge`` inside the pure
/// router and carried out of it as ``BridgeRouter/Action/recordHidden(_:)``.
public struct HiddenReport: Sendable, Equatable {
    public let candidate: BridgeRouter.Candidate
    public let rule: HideRule
    /// True in shadow mode: the message was forwarded anyway.
    public let shadow: Bool
    /// The moderation-log record: every hide (the operator's block list and denylist too, so the log holds
    /// everything the bridge hid), and the spam filter's would-hide verdicts in shadow mode. Nil only for a
    /// verdict answered from the filter's message-id cache (a second relay's copy of a logged message).
    public let record: ModerationRecord?
}

/// The bridge's judgement as a pure value (PRODUCT §3), asked by ``BridgeRouter`` after the structural and
/// signature checks and before the budgets, in this order: the operator's block list, the denylist, then staff
/// (allowed keys) pass without the spam filter, then the spam filter for everyone else. It reads no
/// storage and writes none: the block list reaches it as data (``setBlocked(_:)``, loaded by the shell from
/// the policy file and the identity rows), and what it hid leaves as a ``HiddenReport`` for the shell to
/// store — so hiding never depends on a write succeeding (a full disk still hides).
public struct BridgeJudge: Sendable {
    public struct Settings: Sendable, Equatable {
        /// The moderation-log channel field: the geohash the bridge serves.
        public var channel: String
        /// Keep the text in moderation records and log lines (`modlog.log_text`).
        public var logText: Bool

        public init(channel: String, logText: Bool = true) {
            self.channel = channel
            self.logText = logText
        }
    }

    public let settings: Settings
    public private(set) var policy: AdmissionPolicy
    /// Identity keys never bridged.
    public private(set) var blocked: Set<IdentityKey>
    /// Texts never bridged (keywords, patterns), set by the console.
    public private(set) var denylist = Denylist.empty
    /// Staff (issue 23): the operator's allowed keys. Never hidden by the spam filter (a steward's third "LOST
    /// CHILD near main stage" line is not a repeat to hide); the block list and the denylist still apply, and
    /// block wins over allow. Their lines do not spend or feed the filter's budgets.
    public private(set) var staff: Set<IdentityKey> = []

    public init(settings: Settings, policy: AdmissionPolicy, blocked: Set<IdentityKey> = []) {
        self.settings = settings
        self.policy = policy
        self.blocked = blocked
    }

    /// A judge that passes everything (the spam filter off, nobody blocked): for routers whose tests are
    /// about routing, not judgement.
    public static var passAll: BridgeJudge {
        var config = SpamFilterConfig()
        config.enabled = false
        return BridgeJudge(settings: .init(channel: ""), policy: AdmissionPolicy(config: config))
    }

    /// Replaces the block list (start, SIGHUP, an `identities block` seen in the database).
    public mutating func setBlocked(_ keys: Set<IdentityKey>) { blocked = keys }

    public mutating func setStaff(_ keys: Set<IdentityKey>) { staff = keys }

    /// One key blocked or not, staff or not (a site record: O(1), where a whole list costs O(n) for each of thousands).
    public mutating func mark(_ key: IdentityKey, blocked on: Bool) {
        if on { blocked.insert(key) } else { blocked.remove(key) }
    }

    public mutating func mark(_ key: IdentityKey, staff on: Bool) {
        if on { staff.insert(key) } else { staff.remove(key) }
    }

    public func isStaff(_ key: IdentityKey?) -> Bool { key.map(staff.contains) ?? false }

    public mutating func setShadowMode(_ on: Bool) { policy.setShadowMode(on) }

    /// New spam limits (the console's settings), at once: a fresh filter with `config`, keeping the exempt keys
    /// and the shadow mode in force (shadow mode is its own setting). Every sender starts again with a full
    /// budget and the stored texts are forgotten, as when the filter is switched on — the buckets and the
    /// similarity store are sized by the limits, so none of their state carries over honestly.
    public mutating func setSpamConfig(_ config: SpamFilterConfig) {
        var config = config
        config.shadowMode = policy.isShadowMode
        policy = AdmissionPolicy(config: config, exemptSenders: policy.exemptSenders)
    }

    public mutating func setDenylist(_ list: Denylist) { denylist = list }

    public func isBlocked(_ key: IdentityKey?) -> Bool { key.map(blocked.contains) ?? false }

    /// Judges `candidate` at `now` (Unix seconds): blocked senders, then denylisted texts, are hidden without
    /// spending the filter's budgets; everything else goes through the spam filter. A fresh hidden or would-hide verdict comes with
    /// its report; a verdict answered from the filter's message-id cache (a second relay's copy) does not.
    public mutating func judge(_ candidate: BridgeRouter.Candidate, now: Double) -> (verdict: Verdict, report: HiddenReport?) {
        let direction: SpamDirection = candidate.direction == .meshToNostr ? .meshToNostr : .nostrToMesh
        let spamCandidate = SpamCandidate(
            senderKey: candidate.senderKey, messageID: candidate.messageID, timestamp: candidate.timestamp,
            content: .text(candidate.text), direction: direction)
        /// The operator's hides: never shadowed, logged with what matched.
        func operatorHide(_ rule: HideRule, figures: JSONValue) -> (verdict: Verdict, report: HiddenReport?) {
            let record = ModerationRecord(
                rule: rule, shadow: false, figures: figures, candidate: spamCandidate, channel: settings.channel,
                displayName: candidate.displayName, judgedAt: now, logText: settings.logText)
            return (.hide(rule), HiddenReport(candidate: candidate, rule: rule, shadow: false, record: record))
        }
        if isBlocked(candidate.identity), let identity = candidate.identity {
            return operatorHide(.blocked, figures: .object([("identity", .string(identity.qualified))]))
        }
        // The denylist is the operator's word, like the block list: it hides whatever the filter's shadow mode.
        if let entry = denylist.match(candidate.text) {
            return operatorHide(.denylist, figures: entry.jsonValue)
        }
        if isStaff(candidate.identity) { return (.pass, nil) }
        let verdict = policy.judge(spamCandidate, now: now)
        var report: HiddenReport?
        if verdict.isLogged, !verdict.fromCache, let rule = verdict.rule {
            let record = ModerationRecord(
                candidate: spamCandidate, verdict: verdict, channel: settings.channel, displayName: candidate.displayName,
                judgedAt: now, logText: settings.logText)
            report = HiddenReport(candidate: candidate, rule: .spam(rule), shadow: record?.shadow ?? policy.isShadowMode, record: record)
        }
        guard verdict.isHidden, let rule = verdict.rule else { return (.pass, report) }
        return (.hide(.spam(rule)), report)
    }

    /// Spam filter statistics for metrics.
    public var spamStats: AdmissionPolicy.Stats { policy.currentStats }
}

/// The operator's marks on identities as the identity store holds them — the policy file's lists and the rows the
/// CLI or the console marked: who is blocked, and who is staff (allowed). The executor reads them; the machine
/// gives them to the judge and to the downlink schedule.
public struct OperatorMarks: Sendable, Equatable {
    public var blocked: Set<IdentityKey>
    public var staff: Set<IdentityKey>

    public init(blocked: Set<IdentityKey> = [], staff: Set<IdentityKey> = []) {
        self.blocked = blocked
        self.staff = staff
    }
}
