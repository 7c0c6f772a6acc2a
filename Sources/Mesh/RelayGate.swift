import BitchatWire
import BotSupport

/// Holds the relay of public chat messages until the engine's owner has judged them (SPAM-FILTER §1: a
/// message the bridge hides is "not relayed further on the mesh by the bridge").
///
/// The engine stays pure: it parks the packet here and emits the message (``MeshAction/publicMessage(_:)``);
/// the owner answers with ``MeshInput/relayVerdict(stableID:relay:)``, and only a `relay` answer sends the
/// packet on, with the TTL clamp, split horizon, fan-out and jitter computed at that moment, as for any
/// other relay. Verdicts are remembered by stable message ID, so a later copy (after the dedup set forgot
/// the first) gets the same answer at once.
///
/// Decisions, documented:
/// - **No verdict in time → not relayed** (counted `relay.gate.expired`). The owner (the bridge's
///   coordinator) answers every message it is given — `pass` when the filter is off or in shadow mode — so
///   silence means it fell behind (a full action buffer under a flood). The bridge then withholds rather
///   than amplify traffic nobody judged; every other peer in range still relays the message as usual.
/// - A full gate withholds its oldest held message (counted `relay.gate.overflow`), for the same reason.
/// - Only broadcast chat messages are gated. Verified ones wait here for their verdict; ones the engine
///   cannot attribute (unknown sender, bad signature) are not relayed by the bridge at all
///   (`MeshPeerEngine.withholdUnattributed`). Everything else relays as before: announces, leaves,
///   fragments (a message too long for one frame travels as fragments, which are relayed before the
///   reassembled message can be judged), sync, private and directed packets, carriers.
struct RelayGate {
    enum Limits {
        /// Messages waiting for a verdict; a flood beyond this is withheld oldest first.
        static let maxHeld = 1_024
        /// How long a message waits for its verdict. The judgement is synchronous and takes microseconds;
        /// five seconds only matter when the owner is stalled.
        static let verdictTimeoutMs: UInt64 = 5_000
        /// Verdicts remembered per decision (relay / withhold), oldest forgotten first — as many as the
        /// dedup set's capacity and more, so a copy the dedup set forgot still finds its verdict.
        static let rememberedVerdicts = 4_096
    }

    struct Held {
        let packet: MeshPacket
        let ingress: MeshLinkID
        let heldAt: UInt64
    }

    enum Outcome: Equatable {
        /// Held until the owner answers.
        case held
        /// Already judged: relay now.
        case relay
        /// Already judged: do not relay.
        case withhold
    }

    private var held: [String: Held] = [:]
    /// Insertion order of `held` (stale keys skipped on the way out), so every operation is O(1) amortised.
    private var order = FIFOQueue<String>()
    private var relayed = BoundedSet<String>(capacity: Limits.rememberedVerdicts)
    private var withheld = BoundedSet<String>(capacity: Limits.rememberedVerdicts)

    var heldCount: Int { held.count }

    /// Parks `packet` unless its verdict is known. When the gate is full, the oldest held message is
    /// returned as `evicted` (withheld).
    mutating func admit(_ stableID: String, packet: MeshPacket, ingress: MeshLinkID, now: UInt64) -> (Outcome, evicted: Held?) {
        if withheld.contains(stableID) { return (.withhold, nil) }
        if relayed.contains(stableID) { return (.relay, nil) }
        if held[stableID] != nil { return (.withhold, nil) }
        var evicted: Held?
        if held.count >= Limits.maxHeld, let oldest = popOldest() {
            evicted = oldest
        }
        held[stableID] = Held(packet: packet, ingress: ingress, heldAt: now)
        order.append(stableID)
        return (.held, evicted)
    }

    /// Records the owner's verdict; returns the held packet to relay (relay = true) or drop, if one waits.
    mutating func resolve(_ stableID: String, relay: Bool) -> Held? {
        if relay {
            relayed.insert(stableID)
        } else {
            withheld.insert(stableID)
        }
        return held.removeValue(forKey: stableID)
    }

    /// When the oldest held message's verdict is overdue (nil: none held). Entries already resolved may make it
    /// early; ``expire(now:)`` skips them.
    var nextExpiry: UInt64? {
        guard let key = order.first else { return nil }
        return held[key].map { $0.heldAt + Limits.verdictTimeoutMs } ?? 0
    }

    /// Removes and returns the held messages whose verdict is overdue.
    mutating func expire(now: UInt64) -> [Held] {
        var expired: [Held] = []
        while let key = order.first {
            guard let entry = held[key] else {
                _ = order.popFirst()
                continue
            }
            guard now >= entry.heldAt + Limits.verdictTimeoutMs else { break }
            held[key] = nil
            _ = order.popFirst()
            expired.append(entry)
        }
        return expired
    }

    private mutating func popOldest() -> Held? {
        while let key = order.popFirst() {
            if let entry = held.removeValue(forKey: key) { return entry }
        }
        return nil
    }
}
