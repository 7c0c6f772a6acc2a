import BitchatWire
public import BotSupport
import BotCrypto

/// Why a peer left the table; every removal is reported with one (``MeshAction/peerLost(_:reason:)``).
public enum MeshPeerLossReason: String, Sendable, CaseIterable, CounterKey {
    /// No verified traffic for ``MeshPeerEngine/Configuration/peerTimeoutMs``.
    case timeout
    /// A verified leave.
    case leave
    /// Pushed out by the table's bound (``PeerTable/Limits``).
    case evicted
}

/// The verified peers, in two pools, so that a flood of fresh identities cannot push out the phones that
/// have a history with us.
///
/// A flood of 20 000 fresh, validly signed identities in 60 s pushed every real phone out of the old
/// single table (1 024 entries, least recently seen evicted): 0 of 12 messages relayed until each phone
/// re-announced. Now:
/// - **Established** peers have evidence beyond one burst of announces, ranked weakest first:
///   verified announces at least ``Limits/establishAfterMs`` apart (`age`), then a verified message,
///   leave or uplink, or a link bound by its direct announce (`traffic`). They live in a pool of
///   ``Limits/maxEstablished``; a full pool evicts its weakest-evidence, least recently seen peer — and only
///   for a newcomer with at least as strong evidence. Peers bound to one of our links are never evicted
///   (they are bounded by the links' bindings, ``LinkBindings``), and being direct never lifts a newcomer past
///   a pool's cap: it takes a place only by pushing out someone weaker (issue 33: a flood of 20,000 origin-TTL
///   announces on one segment made every identity direct and grew the table to 20,012).
/// - **First-contact** identities (announces only, within their first ``Limits/establishAfterMs``) share a
///   pool of ``Limits/maxFirstContact`` and evict only each other, least recently seen first.
///
/// Decision, documented: during a sustained flood a phone that arrives then competes with the flood in the
/// first-contact pool until its second announce ≥ 30 s later (or its first verified message) establishes
/// it; phones known before the flood are not affected. Every removal is returned with its reason so the
/// engine reports it (``MeshAction/peerLost(_:reason:)``): consumers that keep per-peer state stay bounded.
///
/// Every signature check against a peer's key goes through ``signingKey(of:)`` — the one place a later
/// lookup of pinned keys (for peers outside the live table) would plug in.
struct PeerTable {
    enum Limits {
        /// Established peers kept (a festival's phones within a few hops stay well below it).
        static let maxEstablished = 1_024
        /// Identities known only from their first announces.
        static let maxFirstContact = 1_024
        /// Verified announces this far apart establish an identity by age: two periods of the apps' sparse
        /// announce cadence (15 ± 4 s, MESH-WIRE §4.7.5), so a phone in range qualifies within about 30 s and
        /// a one-shot identity never does.
        static let establishAfterMs: UInt64 = 30_000
        /// Both pools together: the most peers the table holds besides direct ones.
        static let maxPeers = maxEstablished + maxFirstContact
    }

    /// Evidence that a peer is real, weakest first.
    enum Evidence: Int, Comparable {
        /// Verified announces within its first ``Limits/establishAfterMs``.
        case announce
        /// Verified announces at least ``Limits/establishAfterMs`` apart.
        case age
        /// A verified message, leave or uplink, or a link bound to it.
        case traffic

        static func < (lhs: Evidence, rhs: Evidence) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    private struct Standing {
        let firstSeen: UInt64
        var evidence: Evidence
        var established: Bool
    }

    private(set) var peers: [MeshPeerID: MeshPeer] = [:]
    private var standing: [MeshPeerID: Standing] = [:]
    private(set) var establishedCount = 0
    private(set) var firstContactCount = 0
    /// First contacts in the order they were last seen: one entry per announce, stale entries skipped on the
    /// way out, so the least recently seen is found in O(1) amortised (a flood evicts on every announce).
    private var firstContactOrder = FIFOQueue<(id: MeshPeerID, seen: UInt64)>()

    var count: Int { peers.count }

    subscript(id: MeshPeerID) -> MeshPeer? { peers[id] }

    func isEstablished(_ id: MeshPeerID) -> Bool { standing[id]?.established ?? false }

    func evidence(of id: MeshPeerID) -> Evidence? { standing[id]?.evidence }

    /// The key a packet claiming to be from `id` must verify under (nil: not known).
    func signingKey(of id: MeshPeerID) -> Ed25519PublicKey? { peers[id]?.signingPublicKey }

    /// Records a verified announce (the caller checked keys and TOFU). Returns the peers evicted to make
    /// room, each to be reported lost.
    mutating func recordAnnounce(_ peer: MeshPeer, now: UInt64, counters: inout MeshCounters) -> [MeshPeerID] {
        var evicted: [MeshPeerID] = []
        if var state = standing[peer.id] {
            peers[peer.id] = peer
            if !state.established { noteFirstContact(peer) }
            if state.evidence == .announce, now >= state.firstSeen + Limits.establishAfterMs { state.evidence = .age }
            if peer.isDirect { state.evidence = .traffic }
            standing[peer.id] = state
        } else {
            let evidence: Evidence = peer.isDirect ? .traffic : .announce
            if firstContactCount >= Limits.maxFirstContact, let victim = leastRecentFirstContact() {
                remove(victim)
                evicted.append(victim)
            }
            peers[peer.id] = peer
            standing[peer.id] = Standing(firstSeen: now, evidence: evidence, established: false)
            firstContactCount += 1
            noteFirstContact(peer)
            counters.peers.add(.added)
        }
        evicted += promoteIfDue(peer.id, counters: &counters)
        return evicted
    }

    /// Verified traffic from `id` (a message, leave or uplink): refreshes it and raises its evidence.
    mutating func recordTraffic(_ id: MeshPeerID, now: UInt64, counters: inout MeshCounters) -> [MeshPeerID] {
        guard peers[id] != nil, var state = standing[id] else { return [] }
        peers[id]?.lastSeen = now
        state.evidence = .traffic
        standing[id] = state
        return promoteIfDue(id, counters: &counters)
    }

    /// Whether one of our links is bound to `id` (a bound peer is traffic evidence and never evicted).
    mutating func setDirect(_ id: MeshPeerID, _ direct: Bool, counters: inout MeshCounters) -> [MeshPeerID] {
        guard peers[id] != nil else { return [] }
        peers[id]?.isDirect = direct
        guard direct else { return [] }
        standing[id]?.evidence = .traffic
        return promoteIfDue(id, counters: &counters)
    }

    @discardableResult
    mutating func remove(_ id: MeshPeerID) -> MeshPeer? {
        guard let peer = peers.removeValue(forKey: id), let state = standing.removeValue(forKey: id) else { return nil }
        if state.established { establishedCount -= 1 } else { firstContactCount -= 1 }
        return peer
    }

    /// Peers with no verified traffic for `timeoutMs`, removed (in ID order, so runs are reproducible).
    mutating func expire(now: UInt64, timeoutMs: UInt64) -> [MeshPeerID] {
        let silent = peers.values.filter { now > $0.lastSeen + timeoutMs }.map(\.id).sorted()
        for id in silent { remove(id) }
        return silent
    }

    // MARK: Pools

    /// Moves `id` to the established pool once its evidence allows; a full pool gives up its weakest,
    /// least recently seen non-direct member if that one ranks below the newcomer.
    private mutating func promoteIfDue(_ id: MeshPeerID, counters: inout MeshCounters) -> [MeshPeerID] {
        guard var state = standing[id], !state.established, let peer = peers[id] else { return [] }
        guard state.evidence > .announce || peer.isDirect else { return [] }
        var evicted: [MeshPeerID] = []
        if establishedCount >= Limits.maxEstablished {
            guard let victim = weakestEstablished(), rank(victim) < rank(id) else {
                counters.peers.add(.promotionRefused)
                return []
            }
            remove(victim)
            evicted.append(victim)
        }
        state.established = true
        standing[id] = state
        firstContactCount -= 1
        establishedCount += 1
        counters.peers.add(.promoted)
        return evicted
    }

    /// (evidence, last seen, ID): the order in which established peers are given up.
    private func rank(_ id: MeshPeerID) -> (Int, UInt64, UInt64) {
        ((standing[id]?.evidence ?? .announce).rawValue, peers[id]?.lastSeen ?? 0, id.rawValue)
    }

    private mutating func noteFirstContact(_ peer: MeshPeer) {
        firstContactOrder.append((peer.id, peer.lastSeen))
        guard firstContactOrder.count > 2 * Limits.maxFirstContact + 64 else { return }
        // Mostly stale entries (identities announcing often): rebuild from the pool as it is.
        var order = FIFOQueue<(id: MeshPeerID, seen: UInt64)>()
        for peer in standing.filter({ !$0.value.established }).compactMap({ peers[$0.key] })
            .sorted(by: { ($0.lastSeen, $0.id.rawValue) < ($1.lastSeen, $1.id.rawValue) })
        {
            order.append((peer.id, peer.lastSeen))
        }
        firstContactOrder = order
    }

    /// The least recently seen first contact that is not bound to a link.
    private mutating func leastRecentFirstContact() -> MeshPeerID? {
        while let entry = firstContactOrder.popFirst() {
            guard let state = standing[entry.id], !state.established, let peer = peers[entry.id],
                peer.lastSeen == entry.seen, !peer.isDirect
            else { continue }
            return entry.id
        }
        return nil
    }

    // An O(n) scan, only when the established pool is full and someone earns a place in it (n ≤ 1 024).
    private func weakestEstablished() -> MeshPeerID? {
        var best: MeshPeerID?
        for (id, state) in standing where state.established && peers[id]?.isDirect == false {
            if best.map({ rank(id) < rank($0) }) ?? true { best = id }
        }
        return best
    }
}
