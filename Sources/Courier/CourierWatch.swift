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
/// push out the phones next to the bridge. Every change is incremental (three HMACs for a new peer; the place to free
/// is the front of one of two queues in eviction order, not a scan of every entry); only the UTC day change computes
/// every tag again.
struct CourierWatch {
    struct Entry {
        let noiseKey: [UInt8]
        var verifiedAtMs: UInt64
        var lostAtMs: UInt64?
        var direct: Bool
        /// Its tags for ``CourierWatch/day`` (day − 1, day, day + 1), lowercase hex.
        var tags: [String]
        var slot: Int
        /// Changes with every change of state (verified, lost): a queue item with another stamp is stale.
        var stamp: UInt64 = 0
    }

    /// A place in an eviction order: valid while the entry keeps `stamp`.
    private struct Place {
        let peer: MeshPeerID
        let stamp: UInt64
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
    /// Entries lost from the mesh, in the order they were lost (the first to be evicted and to expire).
    private var lostOrder = FIFOQueue<Place>()
    /// Present entries that are not direct peers, in the order they were verified (evicted when none is lost).
    private var presentOrder = FIFOQueue<Place>()
    private var nextStamp: UInt64 = 0

    init(subscriptions: Int, perSubscription: Int, ttlMs: UInt64) {
        self.subscriptions = subscriptions
        self.perSubscription = perSubscription
        self.ttlMs = ttlMs
        members = Array(repeating: [], count: subscriptions)
    }

    var capacity: Int { subscriptions * perSubscription }

    func owner(ofTag tag: String) -> MeshPeerID? { owner[tag] }

    /// When the next entry lost from the mesh stops being watched.
    mutating func nextExpiry() -> UInt64? {
        Self.dropStale(&lostOrder, entries: entries)
        return lostOrder.first.flatMap { entries[$0.peer]?.lostAtMs }.map { $0 + ttlMs }
    }

    /// A verified announce: watched (again), its tags added; false when nothing changed.
    @discardableResult
    mutating func verified(_ peer: MeshPeerID, noiseKey: [UInt8], direct: Bool, nowMs: UInt64) -> Bool {
        if var entry = entries[peer], entry.noiseKey == noiseKey {
            let changed = entry.lostAtMs != nil || entry.direct != direct
            entry.lostAtMs = nil
            entry.direct = direct
            entry.verifiedAtMs = nowMs
            entries[peer] = entry
            placed(peer)
            return changed
        }
        if entries[peer] != nil { remove(peer) }
        guard let slot = freeSlot() ?? makeRoom() else {
            overflow += 1
            return false
        }
        let tags = Self.tags(noiseKey, day: day)
        entries[peer] = Entry(noiseKey: noiseKey, verifiedAtMs: nowMs, lostAtMs: nil, direct: direct, tags: tags, slot: slot)
        placed(peer)
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
        placed(peer)
    }

    /// Drops the entries lost longer than ``ttlMs`` ago (from the front of the lost order); true when one went.
    mutating func expire(nowMs: UInt64) -> Bool {
        var went = false
        while let next = nextExpiry(), next <= nowMs, let place = lostOrder.popFirst() {
            remove(place.peer)
            went = true
        }
        return went
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
        Self.dropStale(&lostOrder, entries: entries)
        Self.dropStale(&presentOrder, entries: entries)
        guard let victim = lostOrder.popFirst() ?? presentOrder.popFirst(), let slot = entries[victim.peer]?.slot else { return nil }
        remove(victim.peer)
        return slot
    }

    /// `peer`'s state changed: a new stamp, and its place at the back of the order it is now in (none for a present
    /// direct peer, which is never evicted). When stale places outnumber the entries, both orders are built anew.
    private mutating func placed(_ peer: MeshPeerID) {
        guard var entry = entries[peer] else { return }
        nextStamp += 1
        entry.stamp = nextStamp
        entries[peer] = entry
        appendPlace(peer, entry)
        if lostOrder.count + presentOrder.count > 2 * entries.count + 64 { rebuildOrders() }
    }

    private mutating func rebuildOrders() {
        lostOrder = FIFOQueue()
        presentOrder = FIFOQueue()
        for (peer, entry) in entries.sorted(by: { ($0.value.lostAtMs ?? 0, $0.value.verifiedAtMs, $0.key) < ($1.value.lostAtMs ?? 0, $1.value.verifiedAtMs, $1.key) }) {
            appendPlace(peer, entry)
        }
    }

    /// `peer`'s place at the back of the order its state puts it in: lost, or present and indirect (a present direct
    /// peer has none).
    private mutating func appendPlace(_ peer: MeshPeerID, _ entry: Entry) {
        if entry.lostAtMs != nil {
            lostOrder.append(Place(peer: peer, stamp: entry.stamp))
        } else if !entry.direct {
            presentOrder.append(Place(peer: peer, stamp: entry.stamp))
        }
    }

    /// Pops the places at the front of `order` whose entry went or changed since.
    private static func dropStale(_ order: inout FIFOQueue<Place>, entries: [MeshPeerID: Entry]) {
        while let first = order.first, entries[first.peer]?.stamp != first.stamp { _ = order.popFirst() }
    }

    static func tags(_ noiseKey: [UInt8], day: UInt32) -> [String] {
        [day == 0 ? 0 : day - 1, day, day &+ 1].map { Hex.encode(CourierTag.tag(noiseKey: noiseKey, day: $0)) }
    }
}
