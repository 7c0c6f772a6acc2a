import BotSupport
import BitchatWire
import BotCrypto

/// Which pool of the dedup set a packet's key went to: decided by what the engine learnt processing it, so
/// traffic nobody can attribute never pushes out the keys of traffic that verified.
public enum DedupPool: String, Sendable, CaseIterable {
    /// Signed packets that verified, from a peer the table holds as established (``PeerTable``).
    case established
    /// Signed packets that verified, from an identity still in the table's first-contact pool (a flood of
    /// fresh identities lands here).
    case firstContact = "first_contact"
    /// Everything else that decoded: packets that failed verification (junk), unsigned or unverifiable ones
    /// (fragments, directed traffic between others, unknown senders, downlink carriers, unknown types).
    case unverified
}

/// The network dedup set of MESH-WIRE §7.3, bounded by time as iOS bounds it and split into pools.
///
/// iOS (`bitchat/Utils/MessageDeduplicator.swift`, `TransportConfig.messageDedupMaxAgeSeconds` = 300,
/// `messageDedupMaxCount` = 1 000) remembers every key for 300 s from its first sighting and, past 1 000
/// keys, trims the oldest to 750. One shared count bound lets 1 001 junk frames flush a signed message, so
/// its replay is relayed again. Here each ``DedupPool`` has its own capacity (trimmed to ¾ like iOS), and a
/// pool's trims only ever evict that pool's keys: junk (frames that fail verification, unattributable
/// traffic) and first-contact floods cannot evict what verified from established peers.
///
/// Keys are the iOS key's fields in binary — sender, timestamp, type and the first 8 bytes of
/// SHA-256(payload) (iOS keeps 4; more only means fewer false duplicates) — so a key costs ~100 bytes with
/// its bookkeeping instead of a 40-character string. Each pool is a FIFO ring (insertion order = expiry and
/// trim order), so every operation is O(1) amortised.
struct DedupSet {
    enum Limits {
        /// Keys are forgotten 300 s after their first sighting (iOS). That outlasts the ±120 s freshness
        /// gate, so within its capacity no copy of a remembered packet can pass both.
        static let expiryMs: UInt64 = 300_000
        /// Established peers' verified traffic: twice what a full established table (1 024 peers announcing
        /// every 15 s) sends inside the ±120 s freshness window (≈ 8 200 announces), plus room for chat.
        /// About 1.6 MB when full.
        static let establishedCapacity = 16_384
        /// First-contact identities' verified packets (a flood of fresh identities competes here).
        static let firstContactCapacity = 4_096
        /// Junk and unverifiable traffic (4× iOS's whole set).
        static let unverifiedCapacity = 4_096

        static func capacity(_ pool: DedupPool) -> Int {
            switch pool {
            case .established: establishedCapacity
            case .firstContact: firstContactCapacity
            case .unverified: unverifiedCapacity
            }
        }
    }

    struct Key: Hashable {
        let sender: UInt64
        let timestamp: UInt64
        let digest: UInt64
        let type: UInt8

        init(_ packet: MeshPacket) {
            sender = packet.sender.rawValue
            timestamp = packet.timestamp
            type = packet.type.rawValue
            digest = SHA256.hash(packet.payload).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
    }

    private struct Entry {
        let at: UInt64
        let pool: DedupPool
    }

    /// A pool's keys in insertion order; every entry is in `seen` (a key is inserted once and leaves only
    /// through its ring).
    private typealias Ring = FIFOQueue<(key: Key, at: UInt64)>

    private var seen: [Key: Entry] = [:]
    private var rings: [DedupPool: Ring] = [:]

    var count: Int { seen.count }

    func count(in pool: DedupPool) -> Int { rings[pool]?.count ?? 0 }

    /// The pool `key` is remembered in (expired keys are forgotten first), or nil.
    mutating func lookup(_ key: Key, now: UInt64) -> DedupPool? {
        expire(now: now)
        return seen[key]?.pool
    }

    func contains(_ key: Key) -> Bool { seen[key] != nil }

    /// Remembers `key` in `pool` (a key already remembered keeps its first pool and time); returns how many
    /// keys of that pool a capacity trim evicted.
    @discardableResult
    mutating func insert(_ key: Key, into pool: DedupPool, now: UInt64) -> Int {
        guard seen[key] == nil else { return 0 }
        seen[key] = Entry(at: now, pool: pool)
        var ring = rings[pool] ?? Ring()
        ring.append((key, now))
        var evicted = 0
        let capacity = Limits.capacity(pool)
        if ring.count > capacity {
            // iOS trims to 75 % of the capacity for amortisation.
            while ring.count > capacity * 3 / 4, let oldest = ring.popFirst() {
                seen[oldest.key] = nil
                evicted += 1
            }
        }
        rings[pool] = ring
        return evicted
    }

    mutating func expire(now: UInt64) {
        for pool in DedupPool.allCases {
            guard var ring = rings[pool], let first = ring.first, now >= first.at &+ Limits.expiryMs else { continue }
            while let oldest = ring.first, now >= oldest.at &+ Limits.expiryMs {
                _ = ring.popFirst()
                seen[oldest.key] = nil
            }
            rings[pool] = ring
        }
    }
}
