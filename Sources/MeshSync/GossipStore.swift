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
    /// A type the bridge does not sync.
    case notStored = "not_stored"
}

/// The rules of the gossip stores as a value: windows, caps, eviction. Both the in-memory and the durable
/// store run this; it reports every insertion and removal as a ``SyncStoreChange``.
public struct GossipStoreCore: Sendable {
    public enum Limits {
        /// iOS keeps the latest announce per peer only while it is ≤ 60 s old (`stalePeerTimeoutSeconds`).
        public static let announceMaxAgeMs: UInt64 = 60_000
        /// Broadcast public messages: 6 h (iOS town-crier window, BOARD.md §9.4).
        public static let messageMaxAgeMs: UInt64 = 6 * 3_600_000
        /// iOS `seenCapacity`: messages held at most; the oldest recorded is evicted first.
        public static let messageCapacity = 1000
        /// Broadcast fragments and files: 15 min (`maxMessageAgeSeconds`).
        public static let fragmentMaxAgeMs: UInt64 = 15 * 60_000
        public static let fragmentCapacity = 600
        public static let fileTransferCapacity = 200
        /// Announces from this many peers at most (ours: bounds the table a spoofing flood could grow;
        /// announces age out after 60 s anyway).
        public static let announceCapacity = 1000
    }

    private var announces: [MeshPeerID: SyncPacket] = [:]
    /// Per kind (message, fragment, file): insertion order and packets by ID.
    private var lists: [SyncStoreKind: OrderedPackets] = [:]

    public init() {}

    public static func maxAge(_ kind: SyncStoreKind) -> UInt64 {
        switch kind {
        case .announce: Limits.announceMaxAgeMs
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
        let maxAge = maxAge(kind)
        return now < maxAge || packet.timestamp >= now - maxAge
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
            } else if announces.count >= Limits.announceCapacity,
                let oldest = announces.values.min(by: { $0.timestamp < $1.timestamp })
            {
                announces[oldest.sender] = nil
                changes.append(.removed(id: oldest.id))
            }
            announces[packet.sender] = packet
            changes.append(.inserted(packet, kind: kind, retainUntil: Self.retainUntil(packet, kind)))
            return .stored
        }
        var list = lists[kind] ?? OrderedPackets()
        defer { lists[kind] = list }
        guard !list.contains(packet.id) else { return .duplicate }
        list.append(packet)
        changes.append(.inserted(packet, kind: kind, retainUntil: Self.retainUntil(packet, kind)))
        while list.count > Self.capacity(kind), let victim = list.removeFirst() {
            changes.append(.removed(id: victim.id))
        }
        return .stored
    }

    public func packets(_ kind: SyncStoreKind, now: UInt64) -> [SyncPacket] {
        if kind == .announce { return announces.values.filter { Self.isFresh($0, kind, now: now) }.sorted { $0.timestamp < $1.timestamp } }
        return (lists[kind]?.all ?? []).filter { Self.isFresh($0, kind, now: now) }
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
        return lists[kind]?.select(notBefore: now > maxAge ? now - maxAge : 0, where: wanted) ?? ([], 0)
    }

    public func count(_ kind: SyncStoreKind) -> Int {
        kind == .announce ? announces.count : lists[kind]?.count ?? 0
    }

    public mutating func prune(now: UInt64, changes: inout [SyncStoreChange]) {
        for (peer, packet) in announces where !Self.isFresh(packet, .announce, now: now) {
            announces[peer] = nil
            changes.append(.removed(id: packet.id))
        }
        for kind in [SyncStoreKind.message, .fragment, .fileTransfer] {
            guard var list = lists[kind] else { continue }
            // Recorded order is roughly timestamp order; remove every stale one wherever it sits.
            let stale = list.all.filter { !Self.isFresh($0, kind, now: now) }
            guard !stale.isEmpty else { continue }
            for packet in stale {
                list.remove(packet.id)
                changes.append(.removed(id: packet.id))
            }
            lists[kind] = list
        }
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
