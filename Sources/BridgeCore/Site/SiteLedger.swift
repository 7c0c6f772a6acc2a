public import BotCrypto
public import BotSupport
public import Nostr
public import Identity

/// What became of one event offered to ``SiteLedger`` (metric label values).
public enum SiteRecordOutcome: String, CounterKey, CaseIterable {
    /// Newer than the record in force for its target (or its target's first): now in force.
    case applied
    /// Not newer than the record in force (our own records coming back from the relays among them).
    case older
    /// Signed by a key that is not a configured operator key.
    case ignoredAuthor = "ignored_author"
    /// An operator's record of another site.
    case otherSite = "other_site"
    /// Does not open with this site's key (sealed by another operator key, or damaged).
    case unreadable
    /// Opened, but not a record (bad payload, or a target copied onto another address).
    case invalid
    /// A new target with ``SiteLedger/Limits/maxRecords`` already held: refused.
    case full
    /// Made here, and refused for good by a relay (`OK false` with `invalid:`, `pow:`, `blocked:` or `restricted:`):
    /// not published again until a relay returns after none was, or the next start (it stays unacknowledged).
    case refused
}

/// The site's moderation state as this stage knows it (issue 35): the newest record of every target, the records
/// made here that no relay has acknowledged yet, and the sets the judge overlays on the bridge's own lists.
///
/// Pure: the machine offers it verified events, asks it to make records for local actions, tells it what relays
/// acknowledged, and asks which records are due to be (re)published.
public struct SiteLedger: Sendable {
    public enum Limits {
        /// Targets held. Never evicted: forgetting a target would let an older record of it win again, so a full
        /// ledger refuses new targets (counted `full`, said in the log) instead. 20,000 is ten times the largest
        /// block list the issue sizes for (2,000 keys); a record costs about 200 bytes here and 600 on a relay.
        public static let maxRecords = 20_000
        /// Records handed to the relays per pass: the pool queues at most 200 per relay while it is down, and a
        /// relay's rate limit answers a burst with `OK false`; each pass after the first is a second later.
        public static let publishBatch = 100
        /// A record no relay acknowledged is offered again after this long (seconds), and at once when a relay
        /// connects after none was.
        public static let republishInterval: Double = 30
        /// Records this stage stamps with one `created_at` second; more go to the next second (a bulk of 2,000 blocks
        /// spans 20 s). A late stage pages back through a relay's capped answers by `created_at` (the pool's
        /// backfill), which cannot page past a second holding more records than the relay returns at once (500 for
        /// most relays).
        public static let recordsPerSecond = 100
    }

    public let key: SiteKey
    public let operators: Set<XOnlyPublicKey>
    /// This stage's name: the records in force that it made are its to keep on the relays (``relaysReturned()``).
    public let ownBridge: String
    public private(set) var records: [SiteTarget: SiteRecord] = [:]
    public private(set) var outcomes = Tally<SiteRecordOutcome>()
    /// Overlays on the bridge's own lists: a target's newest record sets it or clears it, whatever the list says.
    public private(set) var blocks = Overlay<IdentityKey>()
    public private(set) var staff = Overlay<IdentityKey>()
    public private(set) var words = Overlay<String>()
    /// Channel messages released on some stage (event ids): carried without judgement.
    public private(set) var released: Set<String> = []

    /// Records made here and not yet acknowledged by any relay, in the order made, with when each was last sent.
    private var pending: [EventID: (event: NostrEvent, sentAt: Double)] = [:]
    private var pendingOrder: [EventID] = []
    /// The records in force that this stage made, as signed: published again whenever a relay returns, so a relay that
    /// lost its data (an in-memory relay restarted next to the stage) has them again. At most ``Limits/maxRecords``
    /// events (about 700 bytes each).
    private var own: [SiteTarget: NostrEvent] = [:]
    private var nextPass: Double = .infinity
    /// The second this stage last stamped records with, and how many.
    private var stamped: (second: Int64, count: Int) = (.min, 0)

    public struct Overlay<Element: Hashable & Sendable>: Sendable, Equatable {
        public private(set) var set: Set<Element> = []
        public private(set) var cleared: Set<Element> = []

        /// `local` with this overlay's records applied.
        public func applied(to local: Set<Element>) -> Set<Element> { local.subtracting(cleared).union(set) }

        mutating func record(_ element: Element, on: Bool) {
            if on {
                set.insert(element)
                cleared.remove(element)
            } else {
                set.remove(element)
                cleared.insert(element)
            }
        }
    }

    public init(key: SiteKey, operators: Set<XOnlyPublicKey>, ownBridge: String) {
        self.key = key
        self.operators = operators
        self.ownBridge = ownBridge
    }

    public var unacknowledgedCount: Int { pending.count }

    /// Every stage's newest heartbeat, by name.
    public var stages: [SiteRecord] {
        records.values.filter { if case .stage = $0.target { true } else { false } }.sorted { $0.target < $1.target }
    }

    /// The record in force for `target`, if any.
    public func record(_ target: SiteTarget) -> SiteRecord? { records[target] }

    /// Offers a verified event; returns what became of it (also counted) and the record now in force.
    @discardableResult
    public mutating func offer(_ event: NostrEvent) -> (outcome: SiteRecordOutcome, record: SiteRecord?) {
        let result = judge(event)
        outcomes.add(result.outcome)
        return result
    }

    private mutating func judge(_ event: NostrEvent) -> (outcome: SiteRecordOutcome, record: SiteRecord?) {
        let record: SiteRecord
        do {
            record = try SiteRecord(event: event, key: key, operators: operators)
        } catch {
            switch error {
            case .notOperator: return (.ignoredAuthor, nil)
            case .wrongKind, .otherSite: return (.otherSite, nil)
            case .unreadable: return (.unreadable, nil)
            case .badPayload, .addressMismatch: return (.invalid, nil)
            }
        }
        if let current = records[record.target] {
            guard SiteRecord.isNewer((record.createdAt, record.eventID), than: (current.createdAt, current.eventID)) else {
                return (.older, nil)
            }
        } else if records.count >= Limits.maxRecords {
            return (.full, nil)
        }
        apply(record)
        own[record.target] = record.bridge == ownBridge ? event : nil
        return (.applied, record)
    }

    private mutating func apply(_ record: SiteRecord) {
        // A pending record of this target that a newer one replaced is not published any more (a relay refuses the
        // older version of a replaceable event, so it would stay pending for ever).
        if let replaced = records[record.target]?.eventID, replaced != record.eventID, pending.removeValue(forKey: replaced) != nil,
            pending.isEmpty
        {
            pendingOrder = []
            nextPass = .infinity
        }
        records[record.target] = record
        switch record.target {
        case .block(let key): blocks.record(key, on: record.on)
        case .staff(let key): staff.record(key, on: record.on)
        case .word(let term): words.record(term, on: record.on)
        case .release(let id):
            if record.on { released.insert(id) } else { released.remove(id) }
        case .stage: break
        }
    }

    /// A local action as a signed record, applied here at once and pending until a relay acknowledges it. Its
    /// `created_at` is `now`, or one past the record it replaces when that one is not older (a clock behind another
    /// stage's, or two actions in one second): an action always replaces what the moderator saw.
    public mutating func make(
        _ target: SiteTarget, on: Bool, by: String, bridge: String, now: Double, author: SchnorrSecretKey, status: JSONValue? = nil
    ) throws(SiteLedgerError) -> NostrEvent {
        if records[target] == nil, records.count >= Limits.maxRecords { throw .full }
        var createdAt = max(Int64(now), (records[target]?.createdAt ?? Int64.min + 1) + 1)
        if createdAt <= stamped.second {
            createdAt = stamped.count < Limits.recordsPerSecond ? stamped.second : stamped.second + 1
        }
        let event: NostrEvent
        do {
            event = try SiteRecord.event(
                target: target, on: on, by: by, bridge: bridge, createdAt: createdAt, key: key, author: author, status: status)
        } catch {
            throw .signing(error)
        }
        stamped = createdAt == stamped.second ? (createdAt, stamped.count + 1) : (createdAt, 1)
        apply(SiteRecord(target: target, on: on, by: by, bridge: bridge, createdAt: createdAt, eventID: event.id, status: status))
        own[target] = event
        outcomes.add(.applied)
        addPending(event, sentAt: now)
        return event
    }

    /// A record of an earlier run that no relay acknowledged (the store's), about `target`: offered again at the next
    /// pass, if it is still that target's record in force (looked up by target: a start with thousands of such rows
    /// searched every record for each).
    public mutating func restorePending(_ event: NostrEvent, target: SiteTarget) {
        guard records[target]?.eventID == event.id else { return }
        addPending(event, sentAt: -.infinity)
        nextPass = -.infinity
    }

    private mutating func addPending(_ event: NostrEvent, sentAt: Double) {
        guard pending[event.id] == nil else { return }
        pending[event.id] = (event, sentAt)
        pendingOrder.append(event.id)
        nextPass = min(nextPass, sentAt + Limits.republishInterval)
    }

    /// A relay acknowledged `id` (`OK true`): true when it was one of ours pending.
    public mutating func acknowledged(_ id: EventID) -> Bool {
        guard pending.removeValue(forKey: id) != nil else { return false }
        if pending.isEmpty {
            pendingOrder = []
            nextPass = .infinity
        }
        return true
    }

    /// A relay refused `id` (`OK false`): when it is one of ours pending and the refusal is for good
    /// (``isPermanentRefusal(_:)``), it is not published again (a relay that refuses a record for what it is would
    /// refuse it every 30 s for ever) and its record is returned; a rate limit or an error is retried as before.
    public mutating func refused(_ id: EventID, message: String) -> SiteRecord? {
        guard pending[id] != nil, Self.isPermanentRefusal(message) else { return nil }
        pending[id]?.sentAt = .infinity
        outcomes.add(.refused)
        return records.values.first { $0.eventID == id }
    }

    /// NIP-01's machine-readable prefixes that say the event itself is refused (`invalid:`, `pow:`, `blocked:`,
    /// `restricted:`); `rate-limited:`, `error:`, `auth-required:`, `duplicate:` and anything else are not.
    public static func isPermanentRefusal(_ message: String) -> Bool {
        ["invalid:", "pow:", "blocked:", "restricted:"].contains { message.hasPrefix($0) }
    }

    /// A relay connected after none was (at start too): every pending record, and every record in force this stage
    /// made, is offered again at once (a relay answers `duplicate:` for what it has).
    public mutating func relaysReturned() {
        for (_, event) in own.sorted(by: { $0.value.createdAt < $1.value.createdAt }) { addPending(event, sentAt: -.infinity) }
        guard !pending.isEmpty else { return }
        for id in pendingOrder { pending[id]?.sentAt = -.infinity }
        nextPass = -.infinity
    }

    /// When ``due(now:)`` next has records to hand out.
    public var nextDeadline: Double? { pending.isEmpty ? nil : nextPass }

    /// The pending records to publish now (oldest first, at most ``Limits/publishBatch``), marked sent.
    public mutating func due(now: Double) -> [NostrEvent] {
        guard now >= nextPass else { return [] }
        pendingOrder.removeAll { pending[$0] == nil }
        var out: [NostrEvent] = []
        var earliest = Double.infinity
        for id in pendingOrder {
            guard let entry = pending[id] else { continue }
            if out.count < Limits.publishBatch, entry.sentAt + Limits.republishInterval <= now {
                out.append(entry.event)
                pending[id]?.sentAt = now
                earliest = min(earliest, now + Limits.republishInterval)
            } else if entry.sentAt + Limits.republishInterval <= now {
                earliest = min(earliest, now + 1)
            } else {
                earliest = min(earliest, entry.sentAt + Limits.republishInterval)
            }
        }
        nextPass = earliest
        return out
    }
}

/// Why a local action made no site record.
public enum SiteLedgerError: Error, Sendable, CustomStringConvertible {
    case full
    case signing(CryptoError)

    public var description: String {
        switch self {
        case .full: "the site's records are full (\(SiteLedger.Limits.maxRecords) targets); the action applies on this bridge only"
        case .signing(let error): "site record not signed: \(error)"
        }
    }
}
