public import BitchatWire
public import MeshSync
import BotCrypto
import BotSupport

/// The bitchat mesh peer as a pure state machine: inputs in, actions out; time (`now`, ms since the Unix
/// epoch) and randomness are passed in with every input. No I/O, no clock, no threads.
///
/// Policies (MESH-WIRE §4.7, §7):
/// - Ingress: decode (padding-tolerant) → own echo dropped → RSR frames taken only within the window of our
///   request → |timestamp − now| ≤ 120 s → dedup (§7.3, ``DedupSet``: 300 s, in pools, so junk cannot flush what
///   verified). A verified TTL-7 announce claims its link as the apps bind links (``LinkBindings``: one identity
///   on a BLE link, up to 32 on a radio hub's segment).
/// - Announces verify when SHA-256(noise key)[0..8] == sender, the signature holds under the announced key,
///   and keys match any pinned for that peer ID (TOFU, live table and ``PinBook``: a pin outlives silence, and
///   restarts when the owner loads its cache). Messages, leaves and deposits verify against the peer's key,
///   from the live table or, for a peer that fell silent, its pin.
///   Verified peers live in a two-pool ``PeerTable`` (established peers are never pushed out by fresh
///   identities); every removal is reported as ``MeshAction/peerLost(_:reason:)``.
/// - Relay per §7.5 (TTL clamps by degree, jitter from `random`), split horizon, fan-out subset (§7.6) for
///   relayed broadcasts. Decision: packets we originate go on every link — a bridge has few links and no
///   gossip sync to repair a link the subset skipped.
/// - **We never relay what we reject**: a payload our decoders refuse (announce, fragment, carrier), an
///   announce that fails its checks, a fragment the reassembler refuses (e.g. total = 65 535, mismatching
///   totals), a verified message that is not UTF-8 — none is relayed (counted `relay.refusedRejected`).
///   Deviation from iOS, which relays announces whose signature failed: phones drop them anyway, and a
///   bridge joining islands would carry junk floods from one to the other. Messages from unknown senders
///   or with a bad signature are still relayed by plain peers as iOS does (we may simply not know the key).
/// - With ``Configuration/gatePublicRelays`` (the bridge), a verified public broadcast message is relayed
///   only after the owner's ``MeshInput/relayVerdict(stableID:relay:)`` (``RelayGate``).
/// - Frames larger than a link's MTU are cut into v1 fragments (chunk = MTU − 43, ≥ 64, ≤ 256 fragments so
///   Android can reassemble), paced 30 ms apart. Reassembly runs under a byte budget (``Reassembler``).
/// - Deviation, documented: fragments are deduplicated like other packets (iOS instead drops repeats within
///   3 s at ingress); without it, cyclic topologies re-flood every fragment until its TTL runs out.
public struct MeshPeerEngine {
    public enum Limits {
        /// iOS ingress skew bound; phones drop anything further off.
        public static let maxClockSkewMs: UInt64 = 120_000
        /// Bytes a fragment frame adds around its chunk (14 + 8 + 8 + 13), per MESH-WIRE §6.2.
        public static let fragmentOverhead = 43
        /// Smallest chunk size either app uses.
        public static let minimumChunk = 64
        /// Android refuses sets of more fragments.
        public static let maxFragmentsPerFrame = 256
        /// Peer-table bound: both pools of ``PeerTable`` (established and first-contact, 1 024 each).
        public static let maxPeers = PeerTable.Limits.maxPeers
        /// iOS high-degree threshold for relay clamps.
        public static let highDegree = BroadcastRelay.highDegree
        /// Announce-back to a newly verified peer at most once per 5 min.
        public static let announceBackWindowMs: UInt64 = 300_000
        /// How long the sender of a packet sent with ``MeshInput/originateSigned(_:)`` counts as ours: past the
        /// dedup window (300 s) and the ingress skew bound (120 s), an echo cannot come back.
        public static let ownSenderWindowMs: UInt64 = 600_000
        /// Other senders counted as ours at once (the owner's personas, ≤ 32, with room to rotate).
        public static let maxOwnSenders = 256
    }

    public struct Configuration: Sendable {
        /// Base period between announces while links exist (iOS sparse: 15 s ± 4 s).
        public var announceIntervalMs: UInt64 = 15_000
        public var announceJitterMs: UInt64 = 4_000
        /// A verified peer with no traffic for this long is reported lost (iOS: 60 s).
        public var peerTimeoutMs: UInt64 = 60_000
        /// Spacing between fragments of one frame (iOS: 30 ms).
        public var fragmentSpacingMs: UInt64 = 30
        /// Relay verified public broadcast messages only after the owner's ``MeshInput/relayVerdict(stableID:relay:)``
        /// (the bridge: a message its spam filter hides is not relayed by it, SPAM-FILTER §1). Off for plain
        /// peers, which relay at once. See ``RelayGate`` for what is gated and what happens without a verdict.
        public var gatePublicRelays = false
        /// Gossip sync (issue 17; off = nil, the engine then decodes, counts and drops REQUEST_SYNC and RSR as
        /// before). On: REQUEST_SYNCs become ``MeshAction/syncRequest(link:_:)``, verified broadcasts
        /// ``MeshAction/syncStore(_:)``, board packets ``MeshAction/boardPacket(_:link:)`` (relayed only on
        /// ``MeshInput/relayBoard(_:from:)``), request rounds follow this ``SyncRequester`` schedule
        /// (``MeshAction/syncRoundDue(_:)``), and RSR frames are taken within its window.
        public var sync: SyncRequester.Configuration?
        public init() {}
    }

    /// What processing learnt about a packet: where its dedup key goes and whether it may be relayed.
    enum Assessment {
        /// Its signature verified against a known or announced key.
        case verified
        /// Nothing to verify or nothing to verify it with (relayed as usual).
        case unverified
        /// Refused by a decoder or a rule: not relayed.
        case rejected
    }

    public private(set) var identity: MeshIdentity
    public let configuration: Configuration
    /// Drop and event counters as typed families (``MeshCounters``).
    public internal(set) var counters = MeshCounters()

    var links: [MeshLinkID: Int] = [:]
    /// The direct peers of each link (``LinkBindings``): one identity on a BLE link, a bounded number on a radio
    /// hub's segment, a shared medium where every member hears every frame (issue 22). A peer leaves every link
    /// when it leaves the table (``lost(_:_:into:)``).
    var bindings = LinkBindings()
    var table = PeerTable()
    var dedup = DedupSet()
    var gate = RelayGate()
    var reassembler = Reassembler()
    var pinBook = PinBook()
    /// Senders of packets sent with ``MeshInput/originateSigned(_:)``, with when they last sent (ms).
    var ownSenders: [MeshPeerID: UInt64] = [:]
    var nextAnnounceAt: UInt64 = 0
    var announcedBackAt: [MeshPeerID: UInt64] = [:]
    /// ms of our last announce: two announces in the same ms would be identical packets (dedup drops the second).
    var lastAnnounceAt: UInt64 = 0
    /// Our last announce (phones keep it: our REQUEST_SYNC filter covers it).
    var lastAnnounce: MeshPacket?
    /// The sync round scheduler and RSR window (``Configuration/sync``); created at the first input.
    var syncRequester: SyncRequester?
    /// No peer of the table times out before this (a lower bound, exact after each sweep; `.max`: table empty).
    var peerExpiry = UInt64.max

    public init(identity: MeshIdentity, configuration: Configuration = Configuration()) {
        self.identity = identity
        self.configuration = configuration
    }

    /// The verified peers (both pools of the table).
    public var peers: [MeshPeerID: MeshPeer] { table.peers }
    /// Whether `peer` is in the table's established pool (``PeerTable``).
    public func isEstablished(_ peer: MeshPeerID) -> Bool { table.isEstablished(peer) }
    public var linkCount: Int { links.count }
    /// Public messages waiting for the owner's relay verdict.
    public var heldForVerdict: Int { gate.heldCount }
    /// Accounted bytes the reassembler holds (its budget is ``Reassembler/Limits/totalBudget``).
    public var reassemblyBytes: Int { reassembler.accountedBytes }
    /// Pins held beyond the live table (``PinBook``), live peers included.
    public var pinCount: Int { pinBook.count }

    /// The key that verifies `sender`'s packets: its live table entry's, else its pin's (counted when the
    /// pin is what verified, by the caller once the signature held).
    func signingKey(of sender: MeshPeerID) -> (key: Ed25519PublicKey, live: Bool)? {
        if let key = table.signingKey(of: sender) { return (key, true) }
        return pinBook[sender].map { ($0.signingPublicKey, false) }
    }
    /// The direct peers heard on `link` (empty for an unknown link or one no verified peer announced on yet).
    public func directPeers(on link: MeshLinkID) -> Set<MeshPeerID> { bindings.peers(on: link) }

    /// When the engine next has work of its own (``MeshInput/tick``): our announce while a link is up, a peer's
    /// timeout, an overdue relay verdict, a partial fragment set's timeout, a sync round. Nil when nothing is due —
    /// an idle engine with no links sleeps. Cheap (bounds kept as they change), so the owner asks after each input
    /// and wakes at it instead of ticking.
    public func nextDeadline() -> UInt64? {
        var next = links.isEmpty ? UInt64.max : nextAnnounceAt
        if !table.peers.isEmpty { next = min(next, peerExpiry &+ 1) }
        if let gate = gate.nextExpiry { next = min(next, gate) }
        next = min(next, reassembler.nextExpiry)
        if let sync = syncRequester?.nextDue { next = min(next, sync) }
        return next == .max ? nil : next
    }

    public mutating func handle(
        _ input: MeshInput,
        now: UInt64,
        random: inout some RandomNumberGenerator
    ) -> [MeshAction] {
        var actions: [MeshAction] = []
        if let sync = configuration.sync, syncRequester == nil { syncRequester = SyncRequester(configuration: sync, start: now) }
        switch input {
        case .linkUp(let link, let mtu, let kind):
            links[link] = mtu
            bindings.up(link, kind: kind)
            // Announce on every new link (§4.7.5): a direct announce binds the link on the far side.
            announce(now: now, to: [link], into: &actions)
        case .linkDown(let link):
            links[link] = nil
            for peer in bindings.down(link) { notDirect(peer, into: &actions) }
        case .frame(let link, let bytes):
            guard links[link] != nil else {
                counters.ingress.add(.unknownLink)
                break
            }
            receive(bytes, on: link, now: now, random: &random, into: &actions)
        case .tick:
            tick(now: now, random: &random, into: &actions)
        case .sendPublicMessage(let text):
            originate(MeshPacket(type: .message, timestamp: now, sender: identity.peerID, payload: Array(text.utf8)),
                      sign: true, into: &actions)
        case .sendLeave:
            originate(MeshPacket(type: .leave, timestamp: now, sender: identity.peerID, payload: []),
                      sign: true, into: &actions)
        case .sendAnnounce:
            if announce(now: now, to: Array(links.keys).sorted(), into: &actions) { scheduleNextAnnounce(now: now, random: &random) }
        case .originate(var packet, let sign):
            packet.sender = identity.peerID
            packet.timestamp = now
            originate(packet, sign: sign, into: &actions)
        case .relayVerdict(let stableID, let allowed):
            guard let held = gate.resolve(stableID, relay: allowed) else { break }
            if allowed {
                counters.relayGate.add(.released)
                relay(held.packet, from: held.ingress, now: now, random: &random, into: &actions)
            } else {
                counters.relayGate.add(.hidden)
            }
        case .replacePins(let loaded):
            pinBook.replace(with: loaded, keeping: table.peers)
        case .originateSigned(let packet, let ttl, let delayMs):
            originateSigned(packet, ttl: ttl, delayMs: delayMs, now: now, into: &actions)
        case .forgetPins(let ids):
            let held = ids.filter { pinBook[$0] != nil }
            pinBook.forget(held)
            counters.pins.add(.forgotten, held.count)
        case .sendSyncRequest(let peer, let payload):
            sendSyncRequest(to: peer, payload, now: now, into: &actions)
        case .sendCourier(let peer, let envelope, let ref):
            actions.append(.courierSent(ref: ref, delivered: sendCourier(envelope, to: peer, now: now, into: &actions)))
        case .sendSyncReplies(let link, let frames):
            sendSyncReplies(frames, on: link, into: &actions)
        case .relayBoard(let packet, let ingress):
            relay(packet, from: ingress, now: now, random: &random, into: &actions)
        case .broadcastBoard(var packet):
            remember(key: DedupSet.Key(packet), of: packet, .verified, now: now)
            packet.ttl = MeshPacket.Limits.originTTL
            counters.originated.add(packet.type)
            transmit(packet, to: Array(links.keys).sorted(), delay: 0, into: &actions)
        }
        return actions
    }

    /// Someone else's packet, signed already (a persona's announce or line, a board post): sent on every link at `ttl`
    /// after `delayMs`, its signature left as it is; its sender is remembered as ours for a while (its echo is dropped).
    mutating func originateSigned(_ packet: MeshPacket, ttl: UInt8, delayMs: UInt64, now: UInt64, into actions: inout [MeshAction]) {
        if ownSenders[packet.sender] == nil, ownSenders.count >= Limits.maxOwnSenders {
            ownSenders = ownSenders.filter { now < $0.value + Limits.ownSenderWindowMs }
            if ownSenders.count >= Limits.maxOwnSenders, let oldest = ownSenders.min(by: { $0.value < $1.value })?.key {
                ownSenders[oldest] = nil
            }
        }
        ownSenders[packet.sender] = now
        originate(packet, sign: false, ttl: min(ttl, MeshPacket.Limits.originTTL), delayMs: delayMs, into: &actions)
    }

    /// A signed REQUEST_SYNC (TTL 0) to `peer` on every link where it is a direct peer, with our latest announce put in
    /// its filter: the phone keeps it, and the owner's stores do not hold our announces.
    mutating func sendSyncRequest(to peer: MeshPeerID, _ payload: RequestSyncPayload, now: UInt64, into actions: inout [MeshAction]) {
        let targets = bindings.links(of: peer).sorted()
        var payload = payload
        if let ours = lastAnnounce, payload.requestedTypes.contains(.announce) { payload = payload.covering(MeshMessageIdentity.packetID(ours)) }
        let packet = MeshPacket(type: .requestSync, ttl: 0, timestamp: now, sender: identity.peerID, recipient: peer, payload: payload.encode())
        guard !targets.isEmpty, let signed = try? packet.signed(with: identity.signingKey) else { return }
        counters.originated.add(.requestSync)
        transmit(signed, to: targets, delay: 0, into: &actions)
    }

    /// A signed, directed 0x04 (TTL 7) to `peer` on every link where it is a direct peer; false when there is none.
    mutating func sendCourier(_ envelope: [UInt8], to peer: MeshPeerID, now: UInt64, into actions: inout [MeshAction]) -> Bool {
        let targets = bindings.links(of: peer).sorted()
        let packet = MeshPacket(type: .courierEnvelope, timestamp: now, sender: identity.peerID, recipient: peer, payload: envelope)
        guard !targets.isEmpty, let signed = try? packet.signed(with: identity.signingKey) else { return false }
        let before = actions.count
        transmit(signed, to: targets, delay: 0, into: &actions)
        guard actions.count > before else { return false }
        counters.originated.add(.courierEnvelope)
        return true
    }

    /// Sync reply frames onto `link`; one over the link's MTU goes as fragments, each with the reply's TTL 0 and RSR
    /// set so iOS takes them (BOARD.md §8).
    mutating func sendSyncReplies(_ frames: [[UInt8]], on link: MeshLinkID, into actions: inout [MeshAction]) {
        guard let mtu = links[link] else { return }
        for frame in frames {
            if frame.count <= mtu {
                actions.append(.transmit(link: link, frame: frame, delayMs: 0))
            } else if let packet = try? MeshPacket.decode(frame), let pieces = fragmentFrames(of: packet, frame: frame, mtu: mtu) {
                for (index, piece) in pieces.enumerated() {
                    actions.append(.transmit(
                        link: link, frame: MeshPacket.syncReplyFrame(piece) ?? piece, delayMs: UInt64(index) * configuration.fragmentSpacingMs))
                }
            } else {
                counters.transmit.add(.cannotFragment)
            }
        }
    }

    // MARK: Origination

    /// Our own packets are never processed again: their echo carries our sender ID (dropped at ingress).
    mutating func originate(
        _ packet: MeshPacket, sign: Bool, ttl: UInt8 = MeshPacket.Limits.originTTL, delayMs: UInt64 = 0, into actions: inout [MeshAction]
    ) {
        var packet = packet
        packet.ttl = ttl
        if sign {
            guard let signed = try? packet.signed(with: identity.signingKey) else {
                counters.transmit.add(.signFailed)
                return
            }
            packet = signed
        }
        counters.originated.add(packet.type)
        keepOwn(packet, into: &actions)
        transmit(packet, to: Array(links.keys).sorted(), delay: delayMs, into: &actions)
    }

    /// What phones store of what we send goes to our own sync store too (``MeshAction/originated(_:)``): iOS keeps
    /// its own sends (`onPublicPacketSeen` after `sendMessage`/`sendAnnounceNow`), so its REQUEST_SYNC filter covers
    /// them — a filter that lacks them has every phone send them all back in every round (APP-BEHAVIOUR §2). Our own
    /// announces are not reported (one goes out per newcomer, hundreds a second under an announce flood): the latest is
    /// put in every request's filter as it leaves (``sendSyncRequest(to:_:now:into:)``).
    mutating func keepOwn(_ packet: MeshPacket, into actions: inout [MeshAction]) {
        guard syncRequester != nil, packet.isBroadcast, packet.type == .announce || packet.type == .message else { return }
        actions.append(.originated(packet))
    }

    /// Our announce on `targets`; false when it could not be made.
    @discardableResult
    mutating func announce(now: UInt64, to targets: [MeshLinkID], into actions: inout [MeshAction]) -> Bool {
        guard let announce = makeAnnounce(now: now) else { return false }
        transmit(announce, to: targets, delay: 0, into: &actions)
        return true
    }

    /// Our signed v1 announce (TTL 7, unpadded): TLVs 01/02/03 [05] [06]; no neighbour list, to stay < 100 B.
    mutating func makeAnnounce(now: UInt64) -> MeshPacket? {
        lastAnnounceAt = now
        let payload = AnnouncePayload(
            nickname: identity.nickname, noisePublicKey: identity.noisePublicKey,
            signingPublicKey: identity.signingKey.publicKey.rawRepresentation,
            capabilities: identity.capabilities, bridgeGeohash: identity.bridgeGeohash
        )
        guard let bytes = try? payload.encode() else { return nil }
        let packet = MeshPacket(type: .announce, timestamp: now, sender: identity.peerID, payload: bytes)
        lastAnnounce = try? packet.signed(with: identity.signingKey)
        return lastAnnounce
    }

    mutating func scheduleNextAnnounce(now: UInt64, random: inout some RandomNumberGenerator) {
        let jitter = configuration.announceJitterMs
        let offset = jitter == 0 ? 0 : UInt64.random(in: 0...(2 * jitter), using: &random)
        nextAnnounceAt = now + configuration.announceIntervalMs - jitter + offset
    }

    mutating func tick(now: UInt64, random: inout some RandomNumberGenerator, into actions: inout [MeshAction]) {
        if !links.isEmpty, now >= nextAnnounceAt {
            announce(now: now, to: Array(links.keys).sorted(), into: &actions)
            scheduleNextAnnounce(now: now, random: &random)
        }
        if now > peerExpiry {
            for id in table.expire(now: now, timeoutMs: configuration.peerTimeoutMs) { lost(id, .timeout, into: &actions) }
            peerExpiry = (table.peers.values.lazy.map(\.lastSeen).min() ?? .max) &+ configuration.peerTimeoutMs
            if table.peers.isEmpty { peerExpiry = .max }
        }
        reassembler.sweep(now: now)
        counters.fragment.merge(reassembler.takeEvents())
        dedup.expire(now: now)
        for _ in gate.expire(now: now) { counters.relayGate.add(.expired) }
        if syncRequester != nil {
            for round in syncRequester!.due(now: now) { actions.append(.syncRoundDue(round)) }
        }
    }

    // MARK: Peers

    mutating func lost(_ id: MeshPeerID, _ reason: MeshPeerLossReason, into actions: inout [MeshAction]) {
        // Gone from the table, gone from every link: its next origin-TTL announce makes it direct again (and
        // schedules its initial sync round again).
        if bindings.isDirect(id) {
            bindings.remove(id)
            syncRequester?.directPeerDisconnected(id)
        }
        switch reason {
        case .timeout: counters.peers.add(.lostTimeout)
        case .leave: counters.peers.add(.lostLeave)
        case .evicted: counters.peers.add(.lostEvicted)
        }
        actions.append(.peerLost(id, reason: reason))
    }

    /// Reports peers the table evicted to make room.
    mutating func report(_ evicted: [MeshPeerID], into actions: inout [MeshAction]) {
        for id in evicted { lost(id, .evicted, into: &actions) }
    }

    /// A verified origin-TTL announce from `peer` was heard on `link` (or its duplicate, already verified): `peer`
    /// becomes a direct peer there when the link's binding rules let it (``LinkBindings``). Returns true when it was
    /// direct on no link before (its initial sync round is then scheduled, BOARD.md §13.1); a peer that lost a point
    /// link to it and is direct nowhere else stops being direct.
    @discardableResult
    mutating func markDirect(_ peer: MeshPeerID, on link: MeshLinkID, now: UInt64, into actions: inout [MeshAction]) -> Bool {
        let wasDirect = bindings.isDirect(peer)
        switch bindings.observe(peer, on: link, now: now) {
        case .unchanged:
            return false
        case .refused(let reason):
            counters.links.add(reason)
            return false
        case .bound(let replaced):
            counters.links.add(replaced == nil ? .bound : .rebound)
            if let replaced, !bindings.isDirect(replaced) { notDirect(replaced, into: &actions) }
            guard !wasDirect else { return false }
            syncRequester?.directPeerConnected(peer, now: now)
            return true
        }
    }

    /// `peer` is direct on no link any more (its link went down or changed hands).
    mutating func notDirect(_ peer: MeshPeerID, into actions: inout [MeshAction]) {
        report(table.setDirect(peer, false, counters: &counters), into: &actions)
        syncRequester?.directPeerDisconnected(peer)
    }

    /// Verified traffic from a peer in the table (message, leave, uplink): refreshes and establishes it.
    mutating func noteTraffic(from id: MeshPeerID, now: UInt64, into actions: inout [MeshAction]) {
        peerExpiry = min(peerExpiry, now &+ configuration.peerTimeoutMs)
        report(table.recordTraffic(id, now: now, counters: &counters), into: &actions)
    }
}
