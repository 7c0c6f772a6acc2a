public import BotSupport
public import IdentityCache
public import ModerationLog
public import SpamFilter

/// The bridge's judgement, after structure and signature checks (PRODUCT §3): the operator's block list,
/// then the spam filter. Every message the filter hides (or, in shadow mode, would hide) is written to the
/// moderation log with its direction, rule and figures; a log write that fails (disk full) is reported
/// and counted, and the bridge keeps judging and bridging — hiding never depends on the log.
///
/// Block-list hides are not spam verdicts: they are logged on the log stream (`hidden`, rule `blocked`),
/// not in the moderation log table, whose rules are the filter's six.
public final class ModerationJudgement: BridgeJudgement {
    private let identities: PeerIdentityCache
    private var policy: AdmissionPolicy
    private let moderationLog: ModerationLog?
    private let channel: String
    private let logText: Bool
    private let logger: Logger
    public private(set) var failedLogWrites = 0

    public init(
        identities: PeerIdentityCache, policy: AdmissionPolicy, moderationLog: ModerationLog?, channel: String,
        logText: Bool, logger: Logger
    ) {
        self.identities = identities
        self.policy = policy
        self.moderationLog = moderationLog
        self.channel = channel
        self.logText = logText
        self.logger = logger
    }

    public func judge(_ candidate: BridgeRouter.Candidate, now: Double) -> BridgeRouter.Verdict {
        if let identity = candidate.identity {
            // Fail closed: a block list that cannot be read hides rather than forwards.
            let blocked = (try? identities.isBlocked(identity)) ?? true
            if blocked {
                report(candidate, rule: "blocked", shadow: false)
                return .hide(rule: "blocked")
            }
        }
        let direction: SpamDirection = candidate.direction == .meshToNostr ? .meshToNostr : .nostrToMesh
        let spamCandidate = SpamCandidate(
            senderKey: candidate.senderKey, messageID: candidate.messageID, timestamp: candidate.timestamp,
            content: .text(candidate.text), direction: direction)
        let verdict = policy.judge(spamCandidate, now: now)
        // Only a fresh hidden (or would-hide) verdict is logged: the record is built for those alone.
        if verdict.isLogged, !verdict.fromCache,
            let record = ModerationRecord(
                candidate: spamCandidate, verdict: verdict, channel: channel, displayName: candidate.displayName, judgedAt: now,
                logText: logText)
        {
            do {
                _ = try moderationLog?.append(record)
            } catch {
                failedLogWrites += 1
                logger.error("moderation log write failed; the message is still hidden", [("error", .string("\(error)"))])
            }
            report(candidate, rule: record.rule.rawValue, shadow: record.shadow)
        }
        guard verdict.isHidden, let rule = verdict.rule else { return .pass }
        return .hide(rule: rule.rawValue)
    }

    /// Applies the moderation log's retention (age and count).
    public func maintain(now: Double) {
        do {
            _ = try moderationLog?.prune(now: now)
        } catch {
            failedLogWrites += 1
            logger.error("moderation log retention failed", [("error", .string("\(error)"))])
        }
    }

    /// Spam filter statistics for metrics.
    public var spamStats: AdmissionPolicy.Stats { policy.currentStats }

    private func report(_ candidate: BridgeRouter.Candidate, rule: String, shadow: Bool) {
        var metadata: [(String, JSONValue)] = [
            ("hidden.rule", .string(rule)), ("hidden.direction", .string(candidate.direction.rawValue)),
            ("hidden.sender", .string(candidate.senderKey)), ("hidden.message", .string(candidate.messageID)),
            ("hidden.shadow", .bool(shadow)),
        ]
        if let name = candidate.displayName { metadata.append(("hidden.name", .string(name))) }
        if logText { metadata.append(("hidden.text", .string(String(candidate.text.prefix(120))))) }
        logger.notice(shadow ? "would hide (shadow mode)" : "hidden", metadata)
    }
}
