public import BotCrypto
public import BotSupport
public import Nostr
public import Identity

/// Why a Nostr event is not a fleet list this bridge applies (issue 18, fleet moderation). Each names its
/// reason; ``FleetListState`` counts them by ``FleetListOutcome``.
public enum FleetListError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not kind ``FleetList/kind``.
    case wrongKind(Int)
    /// No `d` tag: a set without an identifier is no site's list.
    case noSite
    /// A list for another site (`d` tag).
    case otherSite(String)
    /// Signed by a key that is not one of the configured operator keys (hex of the author).
    case notOperator(String)
    /// A `p` or `mesh` tag whose value is not 64 hex characters, or a `word` tag that is empty or too long.
    case badTag(index: Int, reason: String)
    /// More entries than ``FleetList/Limits/maxEntries``.
    case tooManyEntries(limit: Int)

    public var description: String {
        switch self {
        case .wrongKind(let kind): "kind \(kind) is not a fleet list (kind \(FleetList.kind))"
        case .noSite: "fleet list has no d tag"
        case .otherSite(let site): "fleet list is for site '\(site)'"
        case .notOperator(let author): "fleet list author \(author.prefix(8))… is not a configured operator key"
        case .badTag(let index, let reason): "fleet list tag \(index): \(reason)"
        case .tooManyEntries(let limit): "fleet list holds more than \(limit) entries"
        }
    }
}

/// A change a console makes to the fleet list it publishes (read-modify-write of the newest list).
public enum FleetChange: Sendable, Equatable {
    case block(IdentityKey)
    case unblock(IdentityKey)
}

/// The block list and denylist terms shared by every bridge of one site, as its operators sign it.
///
/// Wire form (documented in the README, "Fleet moderation"): a NIP-51 set, kind ``kind`` (30000, the
/// parameterised-replaceable range, so each site has its own list per operator key and relays keep only the
/// newest), with
/// - `["d", <site>]` — the site (``BridgeConfiguration/fleetSite``, by default the geohash);
/// - `["p", <64 hex>]` — a blocked Nostr author (NIP-51 mute lists use `p` the same way);
/// - `["mesh", <64 hex>]` — a blocked mesh peer by fingerprint (SHA-256 of its Noise static key, the
///   ``IdentityKey`` of kind mesh; a tag this project defines);
/// - `["word", <term>]` — a denylist keyword (NIP-51 `word`, matched case-insensitively like the console's
///   keyword entries).
/// Content is empty (no private items). Unknown tags are ignored, as NIP-51 readers do.
public struct FleetList: Sendable, Equatable {
    /// NIP-51 sets live in 30000–39999; 30000 is the first of them. A bridge's list is addressed by
    /// (kind, operator key, `d` = site), so one operator key may keep lists for several sites.
    public static let kind = 30000

    public enum Tag {
        public static let site = "d"
        public static let nostr = "p"
        public static let mesh = "mesh"
        public static let word = "word"
    }

    public enum Limits {
        /// Entries one list holds: the relay pool drops inbound events with more than
        /// ``UnverifiedEvent/Limits/maxTags`` tags (NOSTR-GEO §5.5, as iOS does), and the `d` tag takes one.
        public static let maxEntries = UnverifiedEvent.Limits.maxTags - 1
        /// Longest `word` term: the denylist's own pattern limit.
        public static let maxWordBytes = Denylist.Limits.maxPatternBytes
    }

    public var site: String
    /// Blocked Nostr authors and mesh fingerprints.
    public var blocked: Set<IdentityKey>
    /// Denylist terms, in list order, without repeats.
    public var words: [String]
    /// When the list was signed (0 for a list not yet published).
    public var createdAt: Int64

    public init(site: String, blocked: Set<IdentityKey> = [], words: [String] = [], createdAt: Int64 = 0) {
        self.site = site
        self.blocked = blocked
        var seen: Set<String> = []
        self.words = words.filter { seen.insert($0.lowercased()).inserted }
        self.createdAt = createdAt
    }

    /// Reads `event` as this site's fleet list. The signature is the caller's (the relay pool verifies every
    /// event; the kept file is verified again when loaded); here the author must be one of `operators`.
    public init(event: NostrEvent, site: String, operators: Set<XOnlyPublicKey>) throws(FleetListError) {
        guard event.kind == Self.kind else { throw .wrongKind(event.kind) }
        guard operators.contains(event.pubkey) else { throw .notOperator(event.pubkey.hex) }
        guard let d = event.firstTag(Tag.site), d.count >= 2 else { throw .noSite }
        guard d[1] == site else { throw .otherSite(d[1]) }
        var blocked: Set<IdentityKey> = []
        var words: [String] = []
        var entries = 0
        for (index, tag) in event.tags.enumerated() {
            guard tag.count >= 2 else { continue }
            let kind: IdentityKind
            switch tag[0] {
            case Tag.nostr: kind = .nostr
            case Tag.mesh: kind = .mesh
            case Tag.word:
                let term = tag[1]
                guard !term.isEmpty, term.utf8.count <= Limits.maxWordBytes else {
                    throw .badTag(index: index, reason: "word must be 1–\(Limits.maxWordBytes) bytes")
                }
                words.append(term)
                entries += 1
                continue
            default: continue
            }
            guard let bytes = try? Hex.decode(tag[1], expectedCount: IdentityKey.Limits.keyBytes),
                let key = try? IdentityKey(kind: kind, bytes: bytes)
            else { throw .badTag(index: index, reason: "\(tag[0]) value is not 64 hex characters") }
            blocked.insert(key)
            entries += 1
        }
        guard entries <= Limits.maxEntries else { throw .tooManyEntries(limit: Limits.maxEntries) }
        self.init(site: site, blocked: blocked, words: words, createdAt: event.createdAt)
    }

    /// The list's tags: `d` first, then `p`, `mesh` (each sorted) and the words in order.
    public var tags: [[String]] {
        let sorted = blocked.sorted()
        return [[Tag.site, site]]
            + sorted.filter { $0.kind == .nostr }.map { [Tag.nostr, $0.hex] }
            + sorted.filter { $0.kind == .mesh }.map { [Tag.mesh, $0.hex] }
            + words.map { [Tag.word, $0] }
    }

    /// The list with `change` made. Throws ``FleetListError/tooManyEntries(limit:)`` when a block would not fit.
    public func applying(_ change: FleetChange) throws(FleetListError) -> FleetList {
        var next = self
        switch change {
        case .block(let key):
            next.blocked.insert(key)
            guard next.blocked.count + next.words.count <= Limits.maxEntries else {
                throw .tooManyEntries(limit: Limits.maxEntries)
            }
        case .unblock(let key): next.blocked.remove(key)
        }
        return next
    }

    /// The event to sign for this list: `created_at` is `now`, or one past the list it replaces when the
    /// clock is behind it (a replaceable event must be newer to win on relays and on every bridge).
    public func unsignedEvent(author: XOnlyPublicKey, now: Int64, replacing previous: Int64?) -> UnsignedEvent {
        let createdAt = max(now, (previous ?? Int64.min + 1) + 1)
        return UnsignedEvent(pubkey: author, createdAt: createdAt, kind: Self.kind, tags: tags, content: "")
    }

    /// The judge's block list: the bridge's own blocks and the fleet's.
    public static func mergedBlocks(local: Set<IdentityKey>, fleet: FleetList?) -> Set<IdentityKey> {
        local.union(fleet?.blocked ?? [])
    }

    /// The judge's denylist: the console's entries, then the fleet's words not already among them as a
    /// keyword. Words beyond ``Denylist/Limits/maxEntries`` in all are left out and counted (`dropped`).
    public static func mergedDenylist(local: Denylist, fleet: FleetList?) -> (denylist: Denylist, dropped: Int) {
        guard let fleet, !fleet.words.isEmpty else { return (local, 0) }
        var entries = local.entries
        var keywords = Set(entries.compactMap { entry -> String? in
            if case .keyword(let k) = entry { return k.lowercased() }
            return nil
        })
        var dropped = 0
        for word in fleet.words where keywords.insert(word.lowercased()).inserted {
            guard entries.count < Denylist.Limits.maxEntries else {
                dropped += 1
                continue
            }
            entries.append(.keyword(word))
        }
        // Every entry was checked (local by the console, words by the parser: non-empty, ≤ the pattern limit).
        return ((try? Denylist(entries)) ?? local, dropped)
    }
}

/// What became of one event offered to ``FleetListState`` (metric label values).
public enum FleetListOutcome: String, CounterKey, CaseIterable {
    /// Newer than the list in force: now in force.
    case applied
    /// Not newer than the list in force (or the same event again).
    case older
    /// Signed by a key that is not a configured operator key: ignored.
    case ignoredAuthor = "ignored_author"
    /// An operator's list for another site.
    case otherSite = "other_site"
    /// Malformed (no `d`, a bad tag, too many entries).
    case invalid
}

/// The fleet list in force: the newest valid list of this site by any configured operator key (by
/// `created_at`; equal times broken by the lower event id, as NIP-01 does for replaceable events).
public struct FleetListState: Sendable {
    public let site: String
    public let operators: Set<XOnlyPublicKey>
    public private(set) var current: FleetList?
    /// The event of ``current`` (what the data dir keeps, verified again at load).
    public private(set) var currentEvent: NostrEvent?
    public private(set) var outcomes = Tally<FleetListOutcome>()

    public init(site: String, operators: Set<XOnlyPublicKey>) {
        self.site = site
        self.operators = operators
    }

    /// Whether `event` could be a fleet list at all (the coordinator's routing test).
    public static func isCandidate(_ event: NostrEvent) -> Bool { event.kind == FleetList.kind }

    /// Offers a verified event; returns what became of it (also counted).
    @discardableResult
    public mutating func offer(_ event: NostrEvent) -> FleetListOutcome {
        let outcome = judge(event)
        outcomes.add(outcome)
        return outcome
    }

    private mutating func judge(_ event: NostrEvent) -> FleetListOutcome {
        let list: FleetList
        do {
            list = try FleetList(event: event, site: site, operators: operators)
        } catch {
            switch error {
            case .notOperator: return .ignoredAuthor
            case .otherSite, .wrongKind: return .otherSite
            case .noSite, .badTag, .tooManyEntries: return .invalid
            }
        }
        if let currentEvent {
            let newer = event.createdAt > currentEvent.createdAt
                || (event.createdAt == currentEvent.createdAt && event.id.hex < currentEvent.id.hex)
            guard newer else { return .older }
        }
        current = list
        currentEvent = event
        return .applied
    }
}
