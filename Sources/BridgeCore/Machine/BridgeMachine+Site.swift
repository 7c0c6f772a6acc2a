import BotSupport
import Courier
import Identity
import Nostr

/// The machine's site side (issue 35): the site's moderation records offered from the relays and the store, local
/// actions made into records (applied here at once, kept and published until a relay acknowledges them), the judge's
/// lists overlaid with the records in force, and releases carried on every stage.
extension BridgeMachine {
    /// A verified record from a relay, or from the store at start (`fromStore`: already kept; `unacknowledged`: no relay
    /// took it yet, so it is published again). One in force goes into the judge; a release in force releases the message
    /// if this stage holds it hidden.
    mutating func offerSiteRecord(_ event: NostrEvent, fromStore: Bool = false, unacknowledged: Bool = false, now: Double) -> [Action] {
        guard var ledger = site else { return [] }
        let (outcome, record) = ledger.offer(event)
        guard let record else {
            site = ledger
            let level: LogLevel = outcome == .full ? .warning : .debug
            return [.log(LogLine(level, "site record not applied", [("outcome", .string(outcome.label)), ("event.id", .string(event.id.hex))]))]
        }
        if unacknowledged { ledger.restorePending(event, target: record.target) }
        site = ledger
        var actions: [Action] = fromStore ? [] : [.keepSiteRecord(event, acknowledged: true)]
        if !fromStore, case .stage = record.target {
            actions.append(.log(LogLine(.debug, "stage heard", [("site.stage", .string(record.bridge)), ("site.created_at", .integer(record.createdAt))])))
        } else if !fromStore {
            actions.append(.log(Self.siteLine("site record applied", record)))
            if record.bridge != configuration.nickname { actions.append(.auditSiteRecord(record)) }
        }
        return actions + siteRecordInForce(record, now: now)
    }

    /// A moderator's action here (console, CLI, control socket): a site record when this stage holds the operator
    /// key, else nothing (the local lists already carry it). `by` is the audit's name for who acted.
    mutating func siteAction(_ target: SiteTarget, on: Bool, by: String, now: Double) -> [Action] {
        guard var ledger = site, let author = configuration.fleet?.publisher else { return [] }
        do throws(SiteLedgerError) {
            let event = try ledger.make(target, on: on, by: by, bridge: configuration.nickname, now: now, author: author)
            site = ledger
            guard let record = ledger.record(target) else { return [] }
            return [.keepSiteRecord(event, acknowledged: false), .publish(event), .log(Self.siteLine("site record made", record))]
                + siteRecordInForce(record, now: now)
        } catch {
            return [.log(LogLine(.warning, "site record not made", [("target", .string(target.description)), ("error", .string(error.description))]))]
        }
    }

    private mutating func siteRecordInForce(_ record: SiteRecord, now: Double) -> [Action] {
        // A key's record decides that key whatever the lists say (``applyJudgeLists()`` computes the same), so one key
        // changes in the judge: a catch-up of 20,000 records costs 20,000 small steps, not 20,000 whole lists.
        switch record.target {
        case .block(let key):
            router.mark(key, blocked: record.on)
            return []
        case .word:
            applyJudgeLists()
            return []
        case .staff(let key):
            router.mark(key, staff: record.on)
            return refreshPriorityAuthors(now: now, operatorChange: true)
        case .release(let id):
            guard record.on, held.item(id) != nil else { return [] }
            return release(messageID: id, by: "site:\(record.by)", now: now).actions
        case .stage: return []
        }
    }

    /// Whether `stage`'s newest heartbeat was heard within ``Limits/heartbeatsMissed`` intervals of `now` (seconds).
    public static func isHeard(_ stage: SiteRecord, now: Double) -> Bool {
        Double(stage.createdAt) >= now - Limits.heartbeatsMissed * Limits.heartbeatInterval
    }

    /// This stage's heartbeat, due every ``Limits/heartbeatInterval`` s while a relay is connected (and at once when one
    /// connects after none was): what the other stages' consoles and `status --site` show about it.
    mutating func dueHeartbeat(now: Double) -> [Action] {
        guard var ledger = site, let author = configuration.fleet?.publisher, connectedRelays > 0, now >= nextHeartbeat else { return [] }
        nextHeartbeat = now + Limits.heartbeatInterval
        let status = JSONValue.object([
            ("relays", .integer(Int64(connectedRelays))), ("mesh_peers", .integer(Int64(peers.count))),
            ("queue", .integer(Int64(airtime.pendingCount))),
            ("courier_held", courierGateway.map { .integer(Int64($0.heldCount)) } ?? .null),
            ("courier_pending", courierGateway.map { .integer(Int64($0.pendingCount)) } ?? .null),
        ])
        let stage = configuration.nickname
        do throws(SiteLedgerError) {
            let event = try ledger.make(.stage(stage), on: true, by: "bridge", bridge: stage, now: now, author: author, status: status)
            site = ledger
            return [.keepSiteRecord(event, acknowledged: false), .publish(event)]
        } catch {
            return [.log(LogLine(.warning, "heartbeat not made", [("error", .string(error.description))]))]
        }
    }

    /// The ``SiteLedger`` records an earlier run kept: offered again (verified like a relay's), and those no relay
    /// acknowledged published again at the first pass.
    mutating func restoreSite(_ records: [Restored.SiteRecordRow], now: Double) -> [Action] {
        guard site != nil else { return [] }
        var actions: [Action] = []
        for row in records {
            actions += offerSiteRecord(row.event, fromStore: true, unacknowledged: !row.acknowledged, now: now)
        }
        if let ledger = site, !records.isEmpty {
            actions.append(.log(LogLine(.info, "site records loaded", [
                ("site.records", .integer(Int64(ledger.records.count))), ("site.unacknowledged", .integer(Int64(ledger.unacknowledgedCount))),
            ])))
        }
        return actions
    }

    /// A relay's `OK false` for `id`: one of our records refused for good stops being published (said once, with the
    /// relay's words); `duplicate:` means the relay has it.
    mutating func siteRefused(_ id: EventID, message: String) -> [Action] {
        if message.hasPrefix("duplicate:") { return siteAcknowledged(id) }
        guard let record = site?.refused(id, message: message) else { return [] }
        return [.log(LogLine(.warning, "site record refused by a relay; not published again until a relay returns or the next start", [
            ("site.target", .string(record.target.description)), ("relay.message", .string(String(message.prefix(200)))),
            ("event.id", .string(id.hex)),
        ]))]
    }

    /// A relay acknowledged `id`: one of this stage's records is no longer pending.
    mutating func siteAcknowledged(_ id: EventID) -> [Action] {
        guard site?.acknowledged(id) == true else { return [] }
        return [.siteRecordAcknowledged(id)]
    }

    /// The pending records due now (a relay returned, or ``SiteLedger/Limits/republishInterval`` passed).
    mutating func dueSiteRecords(now: Double) -> [Action] {
        guard let deadline = site?.nextDeadline, deadline <= now else { return [] }
        return (site?.due(now: now) ?? []).map { .publish($0) }
    }

    /// A channel event released on some stage: carried through the release path (the judge skipped), as a release
    /// here would; nil when it is not one.
    mutating func carryReleased(_ event: NostrEvent, now: Double) -> [Action]? {
        guard let released = site?.released, released.contains(event.id.hex) else { return nil }
        switch router.release(event, now: now, random: random.unit()) {
        case .success(let routed): return perform(routed, now: now)
        case .failure(let refusal):
            return [.log(LogLine(.info, "released message not carried", [("message.id", .string(event.id.hex)), ("reason", .string(refusal.description))]))]
        }
    }

    static func siteLine(_ message: String, _ record: SiteRecord) -> LogLine {
        LogLine(.notice, message, [
            ("site.target", .string(record.target.description)), ("site.on", .bool(record.on)), ("site.by", .string(record.by)),
            ("site.bridge", .string(record.bridge)), ("site.created_at", .integer(record.createdAt)),
        ])
    }
}
