public import BotSupport
public import Identity

/// The bounded cache of every key the bridge met (STRANGER-CACHE.md): records verified sightings from both
/// networks, answers the per-packet lookups, and keeps strangers bounded with retention passes.
///
/// One owner (the bridge's actor) calls it; it is not `Sendable`. Time is injected (`now`), never read. A pass
/// runs only inside ``recordSighting(_:now:)``, in the same store transaction as the sighting's write: on the
/// first verified sighting after start, when the UTC day changed since the last pass, and at once when an insert
/// takes the stranger counter above ``RetentionRules/Limits/strangerCap`` (an O(1) check, not a scan). No pass
/// runs while the operator's policy is unreadable (``setOperatorLists(_:)`` with nil, the state at init).
public final class PeerIdentityCache {
    /// A verified sighting (``IdentitySighting``).
    public typealias Sighting = IdentitySighting

    public enum SightingResult: Equatable, Sendable {
        /// Never seen (or forgotten): a new row, pins learned on first use.
        case firstContact
        /// Known; something was written (stamp refresh, new peer ID or nickname).
        case refreshed
        /// Known; nothing changed, nothing written.
        case unchanged
        /// The announce's signing key differs from the pinned one: refused, nothing refreshed.
        case rejectedPinMismatch
    }

    public enum PassReason: String, Sendable {
        case firstAfterStart = "first_after_start"
        case daily
        case cap
        /// The operator's policy changed, so the stranger count had to be taken again.
        case policyReload = "policy_reload"
    }

    public struct PassReport: Equatable, Sendable {
        public let reason: PassReason
        public let day: UTCDay
        public var stamped = 0
        public var forgottenByAge = 0
        public var evictedByCap = 0
        public var strangersAfter = 0
        /// The identities this pass removed (age and cap): a mesh owner forgets their live pins too.
        public var removed: [IdentityKey] = []
    }

    public struct SightingOutcome: Equatable, Sendable {
        public let result: SightingResult
        public let pass: PassReport?
    }

    /// Running totals for the stats log line and `/metrics`.
    public struct Counters: Equatable, Sendable {
        public var sightings = 0
        public var firstContacts = 0
        public var writes = 0
        /// Announces refused because they claimed a pinned Noise key with another signing key.
        public var rejectedPinMismatches = 0
        public var passes = 0
        public var forgottenByAge = 0
        public var evictedByCap = 0
        /// Sightings that would have run a pass but did not, because the policy was unreadable.
        public var passesHeldForPolicy = 0
    }

    private let store: any IdentityStore
    private let logger: Logger
    /// nil while the operator's policy file is unreadable (and before it was first read): fail-closed.
    public private(set) var operatorLists: OperatorLists?
    /// The block list of the last readable policy (kept while the file is unreadable: fail closed).
    private var heldBlocks: Set<IdentityKey> = []
    /// Day of the last pass in this process (not persisted: after a start, age removals wait for a second day).
    public private(set) var lastPassDay: UTCDay?
    /// Strangers in the cache; nil until the first pass counts them (and again after a policy change).
    public private(set) var strangerCount: Int?
    public private(set) var counters = Counters()

    public init(store: any IdentityStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Installs the policy read from the operator's file, or nil when it could not be read (no pass runs until a
    /// readable one arrives). The bridge calls this at start and on SIGHUP.
    ///
    /// While the policy is unreadable, the block list last read stays in force (``isBlocked(_:)``): an editing
    /// mistake in the file must never unblock anyone.
    public func setOperatorLists(_ lists: OperatorLists?) {
        if let lists { heldBlocks = lists.blocked } else if let operatorLists { heldBlocks = operatorLists.blocked }
        if lists == nil, operatorLists != nil {
            logger.info("operator policy unreadable: retention passes stop until it can be read", [("identity.policy", .string("unreadable"))])
        }
        operatorLists = lists
        strangerCount = nil
    }

    /// True when `record` has a relationship on its row or in the operator's lists.
    public func isProtected(_ record: IdentityRecord) -> Bool {
        !record.isStranger || operatorLists?.protects(record.key) == true
    }

    /// Hot path: the pinned signing key for a mesh peer ID (O(log C), nothing else decoded).
    public func signingKey(peerID: UInt64) throws(IdentityStoreError) -> [UInt8]? {
        try store.signingKey(peerID: peerID)
    }

    /// Keys of `kind` starting with `hexPrefix` (``IdentityStore/keys(hexPrefix:kind:limit:)``): a prefix the tables show.
    public func keys(hexPrefix: String, kind: IdentityKind, limit: Int) throws(IdentityStoreError) -> [IdentityKey] {
        try store.keys(hexPrefix: hexPrefix, kind: kind, limit: limit)
    }

    public func record(_ key: IdentityKey) throws(IdentityStoreError) -> IdentityRecord? {
        try store.record(key)
    }

    /// True when the operator blocked `key` (on its row or in the policy file). Blocked keys are never bridged.
    public func isBlocked(_ key: IdentityKey) throws(IdentityStoreError) -> Bool {
        if (operatorLists?.blocked ?? heldBlocks).contains(key) { return true }
        return try store.record(key)?.annotations.blocked == true
    }

    public enum Limits {
        /// Annotated rows read per page when collecting the block list.
        public static let blockListPage = 1_000
        /// Rows read per page when collecting the mesh pins.
        public static let pinPage = 1_000
    }

    /// Every blocked key: the policy file's block list (the last readable one while the file is unreadable)
    /// and the rows the operator blocked with `identities block`. The bridge holds this set in memory and
    /// judges against it; annotated rows are few (relationships), read a page at a time.
    public func blockedKeys() throws(IdentityStoreError) -> Set<IdentityKey> { try operatorMarks().blocked }

    /// The operator's marks in one pass over the annotated rows: every blocked key (``blockedKeys()``) and every
    /// allowed one — staff: the policy file's allow list and the rows marked with `identities allow`.
    public func operatorMarks() throws(IdentityStoreError) -> (blocked: Set<IdentityKey>, allowed: Set<IdentityKey>) {
        var blocked = operatorLists?.blocked ?? heldBlocks
        var allowed = operatorLists?.allowed ?? []
        var after: IdentityKey?
        while true {
            let page = try store.records(.annotated, limit: Limits.blockListPage, after: after)
            for record in page {
                if record.annotations.blocked { blocked.insert(record.key) }
                if record.annotations.allowed { allowed.insert(record.key) }
            }
            guard page.count == Limits.blockListPage, let last = page.last else { return (blocked, allowed) }
            after = last.key
        }
    }

    /// Records a verified sighting and, when one is due, runs a retention pass in the same transaction.
    public func recordSighting(_ sighting: Sighting, now: UTCTime) throws(IdentityStoreError) -> SightingOutcome {
        try store.transaction { () throws(IdentityStoreError) -> SightingOutcome in try record(sighting, now: now) }
    }

    /// Records a batch of verified sightings in one store transaction (the bridge writes them in batches, off the
    /// routing path), each as ``recordSighting(_:now:)`` would, passes included; the outcomes in order. A failure
    /// rolls the whole batch back.
    public func recordSightings(_ sightings: [Sighting], now: UTCTime) throws(IdentityStoreError) -> [SightingOutcome] {
        guard !sightings.isEmpty else { return [] }
        return try store.transaction { () throws(IdentityStoreError) -> [SightingOutcome] in
            var outcomes: [SightingOutcome] = []
            for sighting in sightings { outcomes.append(try record(sighting, now: now)) }
            return outcomes
        }
    }

    private func record(_ sighting: Sighting, now: UTCTime) throws(IdentityStoreError) -> SightingOutcome {
        counters.sightings += 1
        let today = now.day
        let existing = try store.record(sighting.key)
        if let existing, let pinned = existing.pins, let offered = sighting.pins, pinned.signingKey != offered.signingKey {
            _ = try notePinRefusal(existing, now: now)
            return SightingOutcome(result: .rejectedPinMismatch, pass: nil)
        }
        let nickname = sighting.nickname.map { IdentityRecord.truncated($0, maxBytes: IdentityRecord.Limits.maxNicknameBytes) }
        var updated = existing ?? IdentityRecord(key: sighting.key)
        if updated.pins == nil { updated.pins = sighting.pins }
        if let peerID = sighting.peerID { updated.peerID = peerID }
        if let nickname { updated.nickname = nickname }
        if updated.firstSeen == nil { updated.firstSeen = now }
        let protected = isProtected(updated)
        if protected {
            updated.lastSeen = nil
        } else if RetentionRules.shouldRefresh(stamp: updated.lastSeen, today: today) {
            updated.lastSeen = today
        }
        let result: SightingResult
        if existing == nil {
            result = .firstContact
            counters.firstContacts += 1
            if !protected, let count = strangerCount { strangerCount = count + 1 }
        } else {
            result = updated == existing ? .unchanged : .refreshed
        }
        if updated != existing {
            try store.put(updated)
            counters.writes += 1
        }
        let reason: PassReason?
        if lastPassDay == nil {
            reason = .firstAfterStart
        } else if let count = strangerCount, count > RetentionRules.Limits.strangerCap {
            reason = .cap
        } else if lastPassDay != today {
            reason = .daily
        } else if strangerCount == nil {
            reason = .policyReload
        } else {
            reason = nil
        }
        guard let reason else { return SightingOutcome(result: result, pass: nil) }
        guard let lists = operatorLists else {
            counters.passesHeldForPolicy += 1
            return SightingOutcome(result: result, pass: nil)
        }
        let report = try runPass(reason: reason, today: today, announcer: sighting.key, lists: lists)
        return SightingOutcome(result: result, pass: report)
    }

    /// One retention pass (§3): stamp the unstamped, forget the long-unseen (two-day agreement), then trim to
    /// the cap. The announcer is never evicted.
    private func runPass(
        reason: PassReason, today: UTCDay, announcer: IdentityKey, lists: OperatorLists
    ) throws(IdentityStoreError) -> PassReport {
        var report = PassReport(reason: reason, day: today)
        let unstamped = try store.unstampedStrangerKeys().filter { !lists.protects($0) }
        try store.setLastSeen(today, keys: unstamped)
        report.stamped = unstamped.count
        if let cutoff = RetentionRules.forgetCutoff(today: today, previousPass: lastPassDay) {
            let expired = try store.strangerRows(stampedAtOrBefore: cutoff)
                .map(\.key).filter { !lists.protects($0) && $0 != announcer }
            report.forgottenByAge = try store.delete(expired)
            report.removed += expired
        }
        // When the O(1) counter already says the cap is exceeded, the rows the ranking must read anyway give the
        // exact count, so no separate COUNT runs. Otherwise the store counts (every daily pass re-derives the
        // counter from the store, so it cannot drift for long). Either way the count excludes every protected key.
        var strangers: [RetentionRow]?
        var count: Int
        if let known = strangerCount, known - report.forgottenByAge > RetentionRules.Limits.strangerCap {
            let rows = try unprotectedStrangers(lists)
            strangers = rows
            count = rows.count
        } else {
            count = try store.strangerCount()
            for key in lists.allowed.union(lists.verified).union(lists.blocked) {
                if let record = try store.record(key), record.isStranger { count -= 1 }
            }
        }
        if count > RetentionRules.Limits.strangerCap {
            let rows: [RetentionRow]
            if let strangers { rows = strangers } else {
                rows = try unprotectedStrangers(lists)
            }
            let victims = RetentionRules.capEvictions(strangers: rows, today: today, announcer: announcer)
            report.evictedByCap = try store.delete(victims)
            report.removed += victims
            count -= report.evictedByCap
        }
        report.strangersAfter = count
        strangerCount = count
        lastPassDay = today
        counters.passes += 1
        counters.forgottenByAge += report.forgottenByAge
        counters.evictedByCap += report.evictedByCap
        logger.info(
            "identity retention pass",
            [
                ("pass.reason", .string(reason.rawValue)), ("pass.day", .integer(Int64(today.number))),
                ("pass.stamped", .integer(Int64(report.stamped))), ("pass.forgotten", .integer(Int64(report.forgottenByAge))),
                ("pass.evicted", .integer(Int64(report.evictedByCap))), ("identity.strangers", .integer(Int64(count))),
            ])
        return report
    }

    /// Every stranger row the policy file does not protect (no copy when the file lists nobody).
    private func unprotectedStrangers(_ lists: OperatorLists) throws(IdentityStoreError) -> [RetentionRow] {
        let rows = try store.strangerRows(stampedAtOrBefore: nil)
        return lists.count == 0 ? rows : rows.filter { !lists.protects($0.key) }
    }

    /// Changes the operator's annotations of `key` (creating a row for a key never seen, so a block or an allow
    /// can precede the first sighting). Returns the record afterwards, or nil when nothing remains (the
    /// annotations were cleared on a key never seen). A record that becomes protected loses its stamp; one whose
    /// protection lapses is stamped at the next pass and so gets a full retention period.
    @discardableResult
    public func annotate(_ key: IdentityKey, _ change: (inout Annotations) -> Void) throws(IdentityStoreError) -> IdentityRecord? {
        try store.transaction { () throws(IdentityStoreError) -> IdentityRecord? in
            let existing = try store.record(key)
            var updated = existing ?? IdentityRecord(key: key)
            let wasProtected = existing.map(isProtected) ?? false
            change(&updated.annotations)
            if let petname = updated.annotations.petname {
                let cut = IdentityRecord.truncated(petname, maxBytes: Annotations.Limits.maxPetnameBytes)
                updated.annotations.petname = cut.isEmpty ? nil : cut
            }
            if let notes = updated.annotations.notes {
                let cut = IdentityRecord.truncated(notes, maxBytes: Annotations.Limits.maxNotesBytes)
                updated.annotations.notes = cut.isEmpty ? nil : cut
            }
            let protected = isProtected(updated)
            if protected { updated.lastSeen = nil }
            if !updated.annotations.isRelationship && updated.firstSeen == nil {
                // Operator-made row with nothing left on it: nothing to keep.
                if existing != nil { try store.delete([key]) }
                return nil
            }
            if updated != existing { try store.put(updated) }
            if let count = strangerCount, existing != nil, wasProtected != protected {
                strangerCount = count + (protected ? -1 : 1)
            }
            return updated
        }
    }

    /// Counts an announce refused because it claimed `noiseKey`'s pinned identity with another signing key
    /// (the mesh engine refused it against its pin). Returns the identity's refusal count afterwards (1 = the
    /// first ever: the caller logs it), nil when the cache holds no pin for that key (the engine's pin came
    /// from a live peer whose sighting was not written); counted either way. Nothing else changes: no stamp,
    /// no nickname, no peer ID — a refusal refreshes nothing.
    public func recordPinRefusal(noiseKey: [UInt8], now: UTCTime) throws(IdentityStoreError) -> Int? {
        try store.transaction { () throws(IdentityStoreError) -> Int? in
            guard let key = try? IdentityKey.mesh(noiseKey: noiseKey), let existing = try store.record(key),
                existing.pins != nil
            else {
                counters.rejectedPinMismatches += 1
                return nil
            }
            return try notePinRefusal(existing, now: now)
        }
    }

    private func notePinRefusal(_ record: IdentityRecord, now: UTCTime) throws(IdentityStoreError) -> Int {
        counters.rejectedPinMismatches += 1
        var updated = record
        updated.pinRefusals += 1
        updated.lastPinRefusal = now
        try store.put(updated)
        counters.writes += 1
        return updated.pinRefusals
    }

    /// Every mesh identity with pins (for the mesh engine's pin book at start and after another process
    /// changed the cache), read a page at a time.
    public func pinnedMeshRecords() throws(IdentityStoreError) -> [IdentityRecord] {
        var out: [IdentityRecord] = []
        var after: IdentityKey?
        while true {
            let page = try store.records(.all, limit: Limits.pinPage, after: after)
            out += page.filter { $0.key.kind == .mesh && $0.pins != nil }
            guard page.count == Limits.pinPage, let last = page.last else { return out }
            after = last.key
        }
    }

    /// Forgets `key` entirely: pins, peer-ID mapping, nickname-index entry and the operator's annotations on it.
    @discardableResult
    public func forget(_ key: IdentityKey) throws(IdentityStoreError) -> Bool {
        try store.transaction { () throws(IdentityStoreError) -> Bool in
            guard let existing = try store.record(key) else { return false }
            try store.delete([key])
            if !isProtected(existing), let count = strangerCount { strangerCount = count - 1 }
            return true
        }
    }
}
