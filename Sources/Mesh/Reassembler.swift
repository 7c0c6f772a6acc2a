import BitchatWire
import BotSupport

/// Rebuilds frames from type-0x20 fragments (MESH-WIRE §6.3) under a memory budget in bytes.
///
/// Sets are keyed by (sender, fragment ID). A set whose fragments disagree on total or original type is
/// dropped (Android). Completed frames are returned as bytes; the caller decodes them.
///
/// Budget (a fragment bomb — 128 incomplete trains of ≈ 1 MiB — took the old 128-slot reassembler from 33
/// to 173 MB of RSS and churned real deposits out of its slots):
/// - Two pools. Trains whose sender has a verified announce (`trusted`) and trains from strangers never
///   evict each other: each pool has its own slots and bytes (``Limits``). A stranger's train cannot cost a
///   verified peer's train anything.
/// - Bytes are accounted as chunk bytes plus ``Limits/perFragmentOverhead`` per stored fragment, so small
///   chunks cannot hide their bookkeeping. Both pools together stay under ``Limits/totalBudget``.
/// - A pool over its byte budget evicts its largest set first (a bomb's megabyte trains go before a
///   deposit's few kilobytes); a pool out of slots evicts its oldest set (iOS); a sender never holds more
///   than ``Limits/maxSetsPerSender`` sets, its next one evicts its own oldest — so forging fragments under
///   a known peer's ID mostly costs that peer, not the others.
/// - iOS's per-set bounds stay: 1 MiB of chunk bytes, 30 s from the first fragment
///   (`bitchat/Services/BLE/BLEFragmentAssemblyBuffer.swift`); Android holds 1 MiB per set and 4 MiB in all
///   (`app/src/main/java/com/bitchat/android/mesh/FragmentManager.kt`).
struct Reassembler {
    enum Limits {
        /// Chunk bytes per set; exceeding it drops the set (iOS, Android).
        static let maxBytesPerSet = 1 << 20
        /// An incomplete set is dropped 30 s after its first fragment (iOS, Android).
        static let timeoutMs: UInt64 = 30_000
        /// Accounted bytes of trusted senders' sets: a dozen 1 MiB messages at once, or hundreds of deposits.
        static let trustedBudget = 12 << 20
        /// Accounted bytes of strangers' sets (Android's global bound): a stranger's deposit (a few KiB)
        /// still reassembles beside up to three megabyte trains.
        static let strangerBudget = 4 << 20
        /// The whole reassembly memory: the bound is 64 MB of RSS above idle under a bomb.
        static let totalBudget = trustedBudget + strangerBudget
        /// Concurrent sets per pool (iOS keeps 128 in all; Android 64).
        static let trustedSlots = 96
        static let strangerSlots = 32
        /// Sets one sender may hold at once; iOS sends at most 2 trains at a time.
        static let maxSetsPerSender = 4
        /// Bookkeeping charged per stored fragment besides its chunk: the chunk array's header and malloc
        /// rounding, its dictionary slot and index.
        static let perFragmentOverhead = 64
    }

    enum Pool: Int, Sendable {
        case trusted
        case stranger

        var budget: Int { self == .trusted ? Limits.trustedBudget : Limits.strangerBudget }
        var slots: Int { self == .trusted ? Limits.trustedSlots : Limits.strangerSlots }
    }

    enum Outcome: Equatable {
        case incomplete
        case complete([UInt8])
        /// The fragment is refused (the set is dropped): it is not relayed either.
        case rejected(MeshFragmentEvent)
    }

    private struct Key: Hashable {
        let sender: MeshPeerID
        let id: UInt64
    }

    private struct Assembly {
        let total: UInt16
        let type: MessageType
        let startedAt: UInt64
        let pool: Pool
        var chunks: [UInt16: [UInt8]] = [:]
        var chunkBytes = 0
        var accounted: Int { chunkBytes + chunks.count * Limits.perFragmentOverhead }
    }

    private struct Usage {
        var sets = 0
        var bytes = 0
    }

    private var sets: [Key: Assembly] = [:]
    /// Per pool, indexed by `Pool.rawValue`.
    private var usage = [Usage(), Usage()]
    /// No set expires before this (a lower bound: the sweep is skipped until then).
    /// When the oldest partial set times out (a lower bound; `.max` with none).
    private(set) var nextExpiry = UInt64.max
    /// Counted evictions and expiries since the last ``takeEvents()``.
    private var events = Tally<MeshFragmentEvent>()

    var activeCount: Int { sets.count }
    /// Accounted bytes held now (both pools).
    var accountedBytes: Int { usage.reduce(0) { $0 + $1.bytes } }
    func accountedBytes(in pool: Pool) -> Int { usage[pool.rawValue].bytes }
    func sets(in pool: Pool) -> Int { usage[pool.rawValue].sets }

    /// Evictions and expiries counted since the last call.
    mutating func takeEvents() -> Tally<MeshFragmentEvent> {
        defer { events = Tally() }
        return events
    }

    mutating func add(_ fragment: FragmentPayload, from sender: MeshPeerID, trusted: Bool, now: UInt64) -> Outcome {
        sweep(now: now)
        guard !fragment.chunk.isEmpty else { return .rejected(.emptyChunk) }
        let key = Key(sender: sender, id: fragment.fragmentID)
        let pool: Pool = trusted ? .trusted : .stranger
        var assembly: Assembly
        if let existing = sets[key] {
            guard existing.total == fragment.total, existing.type == fragment.originalType else {
                drop(key)
                return .rejected(.mismatch)
            }
            assembly = existing
        } else {
            makeRoomForSet(of: sender, in: pool)
            assembly = Assembly(total: fragment.total, type: fragment.originalType, startedAt: now, pool: pool)
        }
        let before = assembly.accounted
        // Same index overwrites (duplicates do not break reassembly).
        assembly.chunkBytes += fragment.chunk.count - (assembly.chunks[fragment.index]?.count ?? 0)
        assembly.chunks[fragment.index] = fragment.chunk
        guard assembly.chunkBytes <= Limits.maxBytesPerSet else {
            if sets[key] != nil { drop(key) }
            return .rejected(.setTooLarge)
        }
        guard assembly.chunks.count == Int(assembly.total) else {
            store(assembly, at: key, growth: assembly.accounted - before)
            return .incomplete
        }
        if sets[key] != nil { drop(key) }
        var frame: [UInt8] = []
        frame.reserveCapacity(assembly.chunkBytes)
        for index in 0..<assembly.total {
            // `chunks.count == total` with every index < total (the decoder checks) means all are present.
            frame += assembly.chunks[index] ?? []
        }
        return .complete(frame)
    }

    /// Drops sets older than the timeout (counted `expired`).
    mutating func sweep(now: UInt64) {
        guard now >= nextExpiry else { return }
        let late = sets.filter { now >= $0.value.startedAt &+ Limits.timeoutMs }.keys
        for key in late {
            drop(key)
            events.add(.expired)
        }
        nextExpiry = sets.values.map { $0.startedAt &+ Limits.timeoutMs }.min() ?? .max
    }

    // MARK: Budget

    /// Stores `assembly` grown by `growth` accounted bytes, evicting the pool's largest sets while the pool
    /// is over its budget; when the growing set is (one of) the largest, it is the one dropped.
    private mutating func store(_ assembly: Assembly, at key: Key, growth: Int) {
        let pool = assembly.pool.rawValue
        if sets[key] == nil {
            usage[pool].sets += 1
            nextExpiry = min(nextExpiry, assembly.startedAt &+ Limits.timeoutMs)
        }
        sets[key] = assembly
        usage[pool].bytes += growth
        while usage[pool].bytes > assembly.pool.budget {
            let largest = sets.filter { $0.value.pool == assembly.pool }.max { lhs, rhs in
                (lhs.value.accounted, lhs.key == key ? 1 : 0) < (rhs.value.accounted, rhs.key == key ? 1 : 0)
            }
            guard let largest = largest?.key else { return }
            drop(largest)
            events.add(.evictedBytes)
            if largest == key { return }
        }
    }

    /// Before a new set of `sender`: its own oldest set goes if it holds ``Limits/maxSetsPerSender``, then
    /// the pool's oldest if the pool's slots are full.
    private mutating func makeRoomForSet(of sender: MeshPeerID, in pool: Pool) {
        let own = sets.filter { $0.key.sender == sender }
        if own.count >= Limits.maxSetsPerSender, let oldest = Self.oldest(own) {
            drop(oldest)
            events.add(.evictedSenderQuota)
        }
        if usage[pool.rawValue].sets >= pool.slots, let oldest = Self.oldest(sets.filter { $0.value.pool == pool }) {
            drop(oldest)
            events.add(.evictedSlot)
        }
    }

    private static func oldest(_ candidates: [Key: Assembly]) -> Key? {
        candidates.min { ($0.value.startedAt, $0.key.sender.rawValue, $0.key.id) < ($1.value.startedAt, $1.key.sender.rawValue, $1.key.id) }?.key
    }

    private mutating func drop(_ key: Key) {
        guard let set = sets.removeValue(forKey: key) else { return }
        usage[set.pool.rawValue].sets -= 1
        usage[set.pool.rawValue].bytes -= set.accounted
    }
}
