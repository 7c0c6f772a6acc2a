import BitchatWire
public import BotSupport

/// Announces, public messages, fragments and files held for sync (BOARD.md §9.4: "what iOS stores per
/// type"). Only packets that verified may be recorded — the caller's duty, since verification needs the
/// sender's announced key; broadcast only; each kind with its own age window and cap.
public protocol GossipPacketStore: AnyObject {
    /// Records a verified packet (announce, message, fragment or file); other types are ``GossipRecordOutcome/notStored``.
    @discardableResult
    func record(_ packet: SyncPacket, now: UInt64) -> GossipRecordOutcome
    /// The live packets of `kind`, oldest recorded first (announces: one per peer, any order).
    func packets(_ kind: SyncStoreKind, now: UInt64) -> [SyncPacket]
    /// Drops everything past its age window.
    func prune(now: UInt64)
    /// The live packets of `kind` for which `wanted(timestamp, h64)` holds, in the order of ``packets(_:now:)``,
    /// and how many live ones it declined. The responder's fast path: the store scans its own timestamp and
    /// hash columns, so choosing a reply set neither hashes nor copies what is not sent.
    func select(_ kind: SyncStoreKind, now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int)
}

extension GossipPacketStore {
    /// The reference form of ``select(_:now:where:)`` over ``packets(_:now:)``.
    public func selectByCopy(_ kind: SyncStoreKind, now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        var selected: [SyncPacket] = []
        var declined = 0
        for packet in packets(kind, now: now) {
            if wanted(packet.timestamp, packet.h64) { selected.append(packet) } else { declined += 1 }
        }
        return (selected, declined)
    }
}

/// What ``GossipPacketStore/record(_:now:)`` did.
public enum GossipRecordOutcome: String, CounterKey, CaseIterable {
    case stored
    /// Same packet ID already held.
    case duplicate
    /// Older than the kind's window (announces: older than the held one too).
    case stale
    /// Directed (recipient set, not FF×8): never gossiped.
    case directed
    /// A message whose sender has no live announce here: a phone that never met the sender would drop it
    /// (APP-BEHAVIOUR §3), so it is not kept.
    case noAnnounce = "no_announce"
    /// A type the bridge does not sync.
    case notStored = "not_stored"
}

/// The rules of the gossip stores as a value: windows, caps, eviction. Both the in-memory and the durable
/// store run this; it reports every insertion and removal as a ``SyncStoreChange``.
///
/// **A sender's messages travel with its announce** (APP-BEHAVIOUR §3): a phone drops a public message whose sender
/// it has no verified announce for, and iOS drops a sender's stored messages together with its stale announce
/// (`GossipSyncManager.removeState`). So a message is kept only while its sender's announce is, and goes with it: the
/// latest announce per sender is kept 10 min after its own timestamp (inside both apps' acceptance of an announce: iOS
/// 900 s, Android ±600 s) and served while it is at most 60 s old (iOS `syncStalePeerTimeoutSeconds`) or its sender
/// has messages here — a phone that left is served with its lines for 10 minutes, one still around (announcing every
/// 15–300 s) for the messages' 6 h, and an identity that only announces for a minute. Decision: a late phone that gets such an announce shows its sender as reachable for a while
/// (iOS 60 s, Android 180 s), as it would after any phone's sync reply.
public struct GossipStoreCore: Sendable {
    public enum Limits {
        /// An announce with no message of its sender here is served ≤ 60 s after its timestamp (iOS
        /// `syncStalePeerTimeoutSeconds`): a flood of identities that only announce is served for a minute.
        public static let announceMaxAgeMs: UInt64 = 60_000
        /// The latest announce per sender is kept ≤ 10 min after its timestamp (Android accepts an announce within
        /// ±600 s, iOS within 900 s) — served all that time once its sender has messages here, which go with it.
        public static let announceRetentionMs: UInt64 = 600_000
        /// Broadcast public messages: 6 h (iOS town-crier window, BOARD.md §9.4).
        public static let messageMaxAgeMs: UInt64 = 6 * 3_600_000
        /// iOS `seenCapacity`: messages held at most; the oldest recorded is evicted first.
        public static let messageCapacity = 1000
        /// Broadcast fragments and files: 15 min (`maxMessageAgeSeconds`).
        public static let fragmentMaxAgeMs: UInt64 = 15 * 60_000
        public static let fragmentCapacity = 600
        public static let fileTransferCapacity = 200
        /// Announces from this many peers at most (ours: bounds the table a spoofing flood could grow; a full
        /// table gives up a silent sender's announce first, the oldest, so a flood cannot take a speaker's lines).
        public static let announceCapacity = 1000
    }

    private var announces: [MeshPeerID: SyncPacket] = [:]
    /// The IDs of each sender's kept messages (their announce's life, and what goes with it).
    private var spoken: [MeshPeerID: Set<[UInt8]>] = [:]
    /// Per kind (message, fragment, file): insertion order and packets by ID.
    private var lists: [SyncStoreKind: OrderedPackets] = [:]

    public init() {}

    public static func maxAge(_ kind: SyncStoreKind) -> UInt64 {
        switch kind {
        case .announce: Limits.announceRetentionMs
        case .message: Limits.messageMaxAgeMs
        case .fragment, .fileTransfer: Limits.fragmentMaxAgeMs
        case .board: .max
        }
    }

    public static func capacity(_ kind: SyncStoreKind) -> Int {
        switch kind {
        case .announce: Limits.announceCapacity
        case .message: Limits.messageCapacity
        case .fragment: Limits.fragmentCapacity
        case .fileTransfer: Limits.fileTransferCapacity
        case .board: 0
        }
    }

    static func isFresh(_ packet: SyncPacket, _ kind: SyncStoreKind, now: UInt64) -> Bool {
        isWithin(maxAge(kind), packet, now: now)
    }

    static func isWithin(_ maxAge: UInt64, _ packet: SyncPacket, now: UInt64) -> Bool { now < maxAge || packet.timestamp >= now - maxAge }

    /// Whether `sender`'s announce is kept at `now` (within its retention): its messages may be kept.
    func announceIsKept(_ sender: MeshPeerID, now: UInt64) -> Bool {
        announces[sender].map { Self.isWithin(Limits.announceRetentionMs, $0, now: now) } ?? false
    }

    /// Whether `sender`'s announce is served at `now`: kept, and young or its sender's messages are kept too.
    func announceIsServed(_ sender: MeshPeerID, now: UInt64) -> Bool {
        guard let announce = announces[sender] else { return false }
        return Self.isWithin(spoken[sender] == nil ? Limits.announceMaxAgeMs : Limits.announceRetentionMs, announce, now: now)
    }

    /// The deadline a packet of `kind` stays until.
    public static func retainUntil(_ packet: SyncPacket, _ kind: SyncStoreKind) -> UInt64 {
        let (sum, overflow) = packet.timestamp.addingReportingOverflow(maxAge(kind))
        return overflow ? .max : sum
    }

    public mutating func record(_ packet: SyncPacket, now: UInt64, changes: inout [SyncStoreChange]) -> GossipRecordOutcome {
        guard let kind = SyncStoreKind(type: packet.type), kind != .board else { return .notStored }
        guard packet.packet.isBroadcast else { return .directed }
        prune(now: now, changes: &changes)
        guard Self.isFresh(packet, kind, now: now) else { return .stale }
        if kind == .announce {
            if let held = announces[packet.sender] {
                if held.id == packet.id { return .duplicate }
                if held.timestamp > packet.timestamp { return .stale }
                changes.append(.removed(id: held.id))
            } else if announces.count >= Limits.announceCapacity {
                // A silent sender's oldest announce first; only when every one has spoken, the oldest speaker's
                // (with its messages).
                let silent = announces.values.filter { spoken[$0.sender] == nil }
                if let oldest = (silent.isEmpty ? Array(announces.values) : silent).min(by: { $0.timestamp < $1.timestamp }) {
                    removeSender(oldest.sender, changes: &changes)
                }
            }
            announces[packet.sender] = packet
            changes.append(.inserted(packet, kind: kind, retainUntil: Self.retainUntil(packet, kind)))
            return .stored
        }
        if kind == .message, !announceIsKept(packet.sender, now: now) { return .noAnnounce }
        var list = lists[kind] ?? OrderedPackets()
        defer { lists[kind] = list }
        guard !list.contains(packet.id) else { return .duplicate }
        list.append(packet)
        if kind == .message { spoken[packet.sender, default: []].insert(packet.id) }
        changes.append(.inserted(packet, kind: kind, retainUntil: Self.retainUntil(packet, kind)))
        while list.count > Self.capacity(kind), let victim = list.removeFirst() {
            if kind == .message { forgetSpoken(victim) }
            changes.append(.removed(id: victim.id))
        }
        return .stored
    }

    /// A sender's announce and every message of it.
    private mutating func removeSender(_ sender: MeshPeerID, changes: inout [SyncStoreChange]) {
        if let announce = announces.removeValue(forKey: sender) { changes.append(.removed(id: announce.id)) }
        guard let ids = spoken.removeValue(forKey: sender), var list = lists[.message] else { return }
        for id in ids.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            list.remove(id)
            changes.append(.removed(id: id))
        }
        lists[.message] = list
    }

    private mutating func forgetSpoken(_ message: SyncPacket) {
        spoken[message.sender]?.remove(message.id)
        if spoken[message.sender]?.isEmpty == true { spoken[message.sender] = nil }
    }

    public func packets(_ kind: SyncStoreKind, now: UInt64) -> [SyncPacket] {
        if kind == .announce { return announces.values.filter { announceIsServed($0.sender, now: now) }.sorted { $0.timestamp < $1.timestamp } }
        return (lists[kind]?.all ?? []).filter { Self.isFresh($0, kind, now: now) && (kind != .message || announceIsKept($0.sender, now: now)) }
    }

    public func select(_ kind: SyncStoreKind, now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        guard kind != .announce else {
            var selected: [SyncPacket] = []
            var declined = 0
            for packet in packets(.announce, now: now) {
                if wanted(packet.timestamp, packet.h64) { selected.append(packet) } else { declined += 1 }
            }
            return (selected, declined)
        }
        let maxAge = Self.maxAge(kind)
        let chosen: (selected: [SyncPacket], declined: Int) = lists[kind]?.select(notBefore: now > maxAge ? now - maxAge : 0, where: wanted) ?? ([], 0)
        guard kind == .message else { return chosen }
        // Never a message without its sender's announce (pruned at the next write; skipped here until then).
        let selected = chosen.selected.filter { announceIsKept($0.sender, now: now) }
        return (selected, chosen.declined)
    }

    public func count(_ kind: SyncStoreKind) -> Int {
        kind == .announce ? announces.count : lists[kind]?.count ?? 0
    }

    public mutating func prune(now: UInt64, changes: inout [SyncStoreChange]) {
        for kind in [SyncStoreKind.message, .fragment, .fileTransfer] {
            guard var list = lists[kind] else { continue }
            // Recorded order is roughly timestamp order; remove every stale one wherever it sits.
            let stale = list.all.filter { !Self.isFresh($0, kind, now: now) }
            guard !stale.isEmpty else { continue }
            for packet in stale {
                list.remove(packet.id)
                if kind == .message { forgetSpoken(packet) }
                changes.append(.removed(id: packet.id))
            }
            lists[kind] = list
        }
        let gone = announces.keys.filter { !announceIsKept($0, now: now) }
        for sender in gone.sorted() { removeSender(sender, changes: &changes) }
    }
}

/// Packets in insertion order with lookup by ID (a bounded list: its owner caps it), with the timestamp and
/// GCS-hash columns kept beside them so a scan touches plain integers. Removal leaves a hole that
/// ``compact()`` squeezes out once holes outnumber live entries, so reads never hash.
struct OrderedPackets: Sendable {
    private var items: [SyncPacket?] = []
    private var stamps: [UInt64] = []
    private var hashes: [UInt64] = []
    private var alive: [Bool] = []
    private var head = 0
    private var position: [[UInt8]: Int] = [:]

    var count: Int { position.count }
    func contains(_ id: [UInt8]) -> Bool { position[id] != nil }
    var all: [SyncPacket] { items[head...].compactMap { $0 } }

    mutating func append(_ packet: SyncPacket) {
        position[packet.id] = items.count
        items.append(packet)
        stamps.append(packet.timestamp)
        hashes.append(packet.h64)
        alive.append(true)
    }

    mutating func removeFirst() -> SyncPacket? {
        while head < items.count {
            let item = items[head]
            items[head] = nil
            alive[head] = false
            head += 1
            if let item {
                position[item.id] = nil
                compact()
                return item
            }
        }
        return nil
    }

    mutating func remove(_ id: [UInt8]) {
        guard let index = position.removeValue(forKey: id) else { return }
        items[index] = nil
        alive[index] = false
        compact()
    }

    func select(notBefore cutoff: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        var selected: [SyncPacket] = []
        var declined = 0
        var i = head
        while i < items.count {
            if alive[i], stamps[i] >= cutoff {
                if wanted(stamps[i], hashes[i]) {
                    if let item = items[i] { selected.append(item) }
                } else {
                    declined += 1
                }
            }
            i += 1
        }
        return (selected, declined)
    }

    private mutating func compact() {
        guard items.count - head > 2 * position.count + 16 || head > 1024 else { return }
        items = items[head...].filter { $0 != nil }
        stamps = items.map { $0!.timestamp }
        hashes = items.map { $0!.h64 }
        alive = [Bool](repeating: true, count: items.count)
        head = 0
        position = [:]
        for (index, item) in items.enumerated() { if let item { position[item.id] = index } }
    }
}

/// The in-memory gossip store: ``GossipStoreCore`` and nothing else.
public final class MemoryGossipStore: GossipPacketStore {
    private var core = GossipStoreCore()
    public init() {}

    @discardableResult
    public func record(_ packet: SyncPacket, now: UInt64) -> GossipRecordOutcome {
        var changes: [SyncStoreChange] = []
        return core.record(packet, now: now, changes: &changes)
    }

    public func packets(_ kind: SyncStoreKind, now: UInt64) -> [SyncPacket] { core.packets(kind, now: now) }

    public func prune(now: UInt64) {
        var changes: [SyncStoreChange] = []
        core.prune(now: now, changes: &changes)
    }

    public func count(_ kind: SyncStoreKind) -> Int { core.count(kind) }

    public func select(_ kind: SyncStoreKind, now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        core.select(kind, now: now, where: wanted)
    }
}
