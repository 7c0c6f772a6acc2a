import BitchatWire
import BotSupport
import Nostr

/// The courier gateway's watch list (COURIER.md §4.2 "Ours"): the verified peers whose drops it fetches, each with its
/// three tags for the current UTC day and a subscription slot it keeps while watched.
///
/// Bounded by the subscriptions: ``capacity`` = subscriptions × peers per subscription (8 × 100; fewer per subscription
/// after a relay refused a filter, ``halve(minimum:)``). When full, a newly
/// verified peer takes the place of the one lost longest ago, else of the longest-watched peer that is not a direct
/// peer; else it is not watched (counted). So a flood of verified strangers costs bounded memory and work, and cannot
/// push out the phones next to the bridge. Every change is incremental (three HMACs for a new peer); only the UTC day
/// change computes every tag again.
struct CourierWatch {
    struct Entry {
        let noiseKey: [UInt8]
        var verifiedAtMs: UInt64
        var lostAtMs: UInt64?
        var direct: Bool
        /// Its tags for ``CourierWatch/day`` (day − 1, day, day + 1), lowercase hex.
        var tags: [String]
        var slot: Int
    }

    let subscriptions: Int
    private(set) var perSubscription: Int
    let ttlMs: UInt64
    private(set) var entries: [MeshPeerID: Entry] = [:]
    private var owner: [String: MeshPeerID] = [:]
    private var members: [Set<MeshPeerID>]
    private(set) var day: UInt32 = 0
    /// Slots whose tags changed since their subscription was last sent.
    private(set) var dirty: Set<Int> = []
    /// Slots sent again even when their tags did not change (a relay closed them).
    private var resend: Set<Int> = []
    /// What each slot's subscription holds now (sorted tags).
    private(set) var sent: [Int: [String]] = [:]
    /// Peers that found no place (the watch list was full of direct peers).
    private(set) var overflow = 0

    init(subscriptions: Int, perSubscription: Int, ttlMs: UInt64) {
        self.subscriptions = subscriptions
        self.perSubscription = perSubscription
        self.ttlMs = ttlMs
        members = Array(repeating: [], count: subscriptions)
    }

    var capacity: Int { subscriptions * perSubscription }

    func owner(ofTag tag: String) -> MeshPeerID? { owner[tag] }

    /// When the next entry lost from the mesh stops being watched.
    var nextExpiry: UInt64? { entries.values.compactMap { $0.lostAtMs.map { $0 + ttlMs } }.min() }

    /// A verified announce: watched (again), its tags added; false when nothing changed.
    @discardableResult
    mutating func verified(_ peer: MeshPeerID, noiseKey: [UInt8], direct: Bool, nowMs: UInt64) -> Bool {
        if var entry = entries[peer], entry.noiseKey == noiseKey {
            let changed = entry.lostAtMs != nil || entry.direct != direct
            entry.lostAtMs = nil
            entry.direct = direct
            entry.verifiedAtMs = nowMs
            entries[peer] = entry
            return changed
        }
        if entries[peer] != nil { remove(peer) }
        guard let slot = freeSlot() ?? makeRoom() else {
            overflow += 1
            return false
        }
        let tags = Self.tags(noiseKey, day: day)
        entries[peer] = Entry(noiseKey: noiseKey, verifiedAtMs: nowMs, lostAtMs: nil, direct: direct, tags: tags, slot: slot)
        members[slot].insert(peer)
        for tag in tags { owner[tag] = peer }
        dirty.insert(slot)
        return true
    }

    /// Left the mesh table: still watched for ``ttlMs``.
    mutating func lost(_ peer: MeshPeerID, nowMs: UInt64) {
        guard entries[peer] != nil else { return }
        entries[peer]?.lostAtMs = nowMs
        entries[peer]?.direct = false
    }

    /// Drops the entries lost longer than ``ttlMs`` ago; true when one went.
    mutating func expire(nowMs: UInt64) -> Bool {
        let gone = entries.filter { $0.value.lostAtMs.map { $0 + ttlMs <= nowMs } ?? false }.map(\.key)
        for peer in gone { remove(peer) }
        return !gone.isEmpty
    }

    /// The UTC day of `nowMs`: on a change every tag is computed again and every slot is due. True when it changed.
    mutating func roll(nowMs: UInt64) -> Bool {
        let today = CourierTag.day(unixSeconds: Int64(nowMs / 1000))
        guard today != day else { return false }
        day = today
        owner = [:]
        for (peer, entry) in entries {
            let tags = Self.tags(entry.noiseKey, day: today)
            entries[peer]?.tags = tags
            for tag in tags { owner[tag] = peer }
        }
        dirty.formUnion(sent.keys)
        dirty.formUnion(Set(entries.values.map(\.slot)))
        return true
    }

    /// Fewer peers per subscription, for a relay that refused a filter (COURIER.md §4.3): half as many, not below
    /// `minimum`. Every entry is placed again — direct peers first, then those present, then the most recently
    /// verified — and those beyond the smaller capacity are no longer watched (counted as overflow). Every subscription
    /// is due again, also one whose tags stay the same (the relay that closed it gets it again). False at the minimum.
    mutating func halve(minimum: Int) -> Bool {
        let smaller = max(1, minimum, perSubscription / 2)
        guard smaller < perSubscription else { return false }
        perSubscription = smaller
        let ranked = entries.sorted {
            ($0.value.direct ? 0 : 1, $0.value.lostAtMs == nil ? 0 : 1, UInt64.max - $0.value.verifiedAtMs, $0.key)
                < ($1.value.direct ? 0 : 1, $1.value.lostAtMs == nil ? 0 : 1, UInt64.max - $1.value.verifiedAtMs, $1.key)
        }
        members = Array(repeating: [], count: subscriptions)
        for (index, peer) in ranked.map(\.key).enumerated() {
            guard index < capacity else {
                remove(peer)
                overflow += 1
                continue
            }
            entries[peer]?.slot = index / perSubscription
            members[index / perSubscription].insert(peer)
        }
        dirty = Set(0..<subscriptions)
        resend = Set(sent.keys)
        return true
    }

    /// The subscriptions to send for the slots that changed (`courier-N`; an emptied one is closed).
    mutating func resubscribe(nowMs: UInt64, filterLimit: Int) -> [CourierGateway.Action] {
        var actions: [CourierGateway.Action] = []
        defer { resend = [] }
        for slot in dirty.sorted() {
            let tags = members[slot].compactMap { entries[$0]?.tags }.flatMap { $0 }.sorted()
            guard tags != (sent[slot] ?? []) || (resend.contains(slot) && !tags.isEmpty) else { continue }
            let id = "courier-\(slot)"
            if tags.isEmpty {
                sent[slot] = nil
                actions.append(.unsubscribe(id: id))
            } else {
                sent[slot] = tags
                actions.append(.subscribe(id: id, filter: NostrFilter(
                    kinds: [CourierDrop.kind], tags: ["x": tags], since: Int64(nowMs / 1000) - 86_400, limit: filterLimit)))
            }
        }
        dirty = []
        return actions
    }

    private mutating func remove(_ peer: MeshPeerID) {
        guard let entry = entries.removeValue(forKey: peer) else { return }
        members[entry.slot].remove(peer)
        for tag in entry.tags where owner[tag] == peer { owner[tag] = nil }
        dirty.insert(entry.slot)
    }

    private func freeSlot() -> Int? { members.firstIndex { $0.count < perSubscription } }

    /// Frees a place: the entry lost longest ago, else the longest-watched one that is not a direct peer.
    private mutating func makeRoom() -> Int? {
        let victim = entries.filter { $0.value.lostAtMs != nil }.min { ($0.value.lostAtMs!, $0.key) < ($1.value.lostAtMs!, $1.key) }?.key
            ?? entries.filter { !$0.value.direct }.min { ($0.value.verifiedAtMs, $0.key) < ($1.value.verifiedAtMs, $1.key) }?.key
        guard let victim, let slot = entries[victim]?.slot else { return nil }
        remove(victim)
        return slot
    }

    static func tags(_ noiseKey: [UInt8], day: UInt32) -> [String] {
        [day == 0 ? 0 : day - 1, day, day &+ 1].map { Hex.encode(CourierTag.tag(noiseKey: noiseKey, day: $0)) }
    }
}
