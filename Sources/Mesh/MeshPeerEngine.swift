public import BitchatWire
public import BotCrypto
import BotSupport

/// Who this node is on the mesh. Plain values: the caller decides where keys come from.
public struct MeshIdentity: Sendable {
    /// X25519 static public key (32 bytes): announce TLV 0x02, and the source of the peer ID.
    public let noisePublicKey: [UInt8]
    /// Ed25519 key that signs announces, messages and leaves.
    public let signingKey: Ed25519PrivateKey
    public var nickname: String
    /// Advertised in TLV 0x05; nil omits the TLV. Advertise only what is implemented (§4.7.3).
    public var capabilities: PeerCapabilities?
    /// TLV 0x06 rendezvous cell, sent with the `bridge` capability.
    public var bridgeGeohash: String?
    public let peerID: MeshPeerID

    public init(
        noisePublicKey: [UInt8],
        signingKey: Ed25519PrivateKey,
        nickname: String,
        capabilities: PeerCapabilities? = PeerCapabilities(),
        bridgeGeohash: String? = nil
    ) {
        self.noisePublicKey = noisePublicKey
        self.signingKey = signingKey
        self.nickname = nickname
        self.capabilities = capabilities
        self.bridgeGeohash = bridgeGeohash
        self.peerID = MeshPeerID(noisePublicKey: noisePublicKey)
    }
}

/// A peer whose announce verified.
public struct MeshPeer: Sendable, Equatable {
    public let id: MeshPeerID
    public var nickname: String
    public let noisePublicKey: [UInt8]
    public let signingPublicKey: Ed25519PublicKey
    public var capabilities: PeerCapabilities?
    public var bridgeGeohash: String?
    /// ms of the last verified traffic.
    public var lastSeen: UInt64
    /// True when one of our links is bound to this peer (it announced to us with TTL 7).
    public var isDirect: Bool
}

/// A verified public chat message.
public struct MeshPublicMessage: Sendable, Equatable {
    public let sender: MeshPeerID
    public let nickname: String
    public let text: String
    public let timestamp: UInt64
    /// iOS `MeshMessageIdentity` (§5.3).
    public let stableID: String
    /// TTL as received (7 = first hop).
    public let ttl: UInt8

    public init(sender: MeshPeerID, nickname: String, text: String, timestamp: UInt64, stableID: String, ttl: UInt8) {
        self.sender = sender
        self.nickname = nickname
        self.text = text
        self.timestamp = timestamp
        self.stableID = stableID
        self.ttl = ttl
    }
}

/// A Nostr carrier accepted by the rules of MESH-WIRE §9.2 (uplinks: directed to us and signed; downlinks: broadcast).
public struct MeshCarrier: Sendable, Equatable {
    public let sender: MeshPeerID
    public let payload: NostrCarrierPayload
    public let timestamp: UInt64

    public init(sender: MeshPeerID, payload: NostrCarrierPayload, timestamp: UInt64) {
        self.sender = sender
        self.payload = payload
        self.timestamp = timestamp
    }
}

/// What the engine is told.
public enum MeshInput: Sendable {
    case linkUp(MeshLinkID, mtu: Int)
    case linkDown(MeshLinkID)
    case frame(MeshLinkID, [UInt8])
    /// Periodic work: announce cadence, peer expiry, reassembly timeouts. Call every ~1 s.
    case tick
    /// Originate a signed public message.
    case sendPublicMessage(String)
    /// Originate a signed leave (on shutdown).
    case sendLeave
    /// Originate a signed announce now.
    case sendAnnounce
    /// Originate any packet (sender and timestamp are set by the engine; signed if `sign`).
    case originate(MeshPacket, sign: Bool)
    /// The owner's verdict on a public message it was given (``MeshAction/publicMessage(_:)``), with
    /// ``MeshPeerEngine/Configuration/gatePublicRelays`` on: `relay` sends the held copy on, otherwise it
    /// is withheld. Remembered by stable ID; a verdict for a message no longer held only updates that memory.
    case relayVerdict(stableID: String, relay: Bool)
}

/// What the engine asks its driver to do or tells it happened.
public enum MeshAction: Sendable, Equatable {
    /// Write `frame` on `link` after `delayMs` (relay jitter, fragment pacing).
    case transmit(link: MeshLinkID, frame: [UInt8], delayMs: UInt64)
    /// A peer verified for the first time or changed nickname/capabilities/cell.
    case peerVerified(MeshPeer)
    /// A peer left (verified leave) or went silent.
    case peerLost(MeshPeerID, reason: String)
    case publicMessage(MeshPublicMessage)
    case carrier(MeshCarrier)
}

/// The bitchat mesh peer as a pure state machine: inputs in, actions out; time (`now`, ms since the Unix
/// epoch) and randomness are passed in with every input. No I/O, no clock, no threads.
///
/// Policies (MESH-WIRE §4.7, §7):
/// - Ingress: decode (padding-tolerant) → own echo dropped → RSR frames dropped (we never request sync) →
///   |timestamp − now| ≤ 120 s → first TTL-7 announce binds an unbound link → dedup (§7.3).
/// - Announces verify when SHA-256(noise key)[0..8] == sender, the signature holds under the announced key,
///   and keys match any pinned for that peer ID (TOFU). Messages and leaves verify against the peer's key.
/// - Relay per §7.5 (TTL clamps by degree, jitter from `random`), split horizon, fan-out subset (§7.6) for
///   relayed broadcasts. Decision: packets we originate go on every link — a bridge has few links and no
///   gossip sync to repair a link the subset skipped.
/// - With ``Configuration/gatePublicRelays`` (the bridge), a verified public broadcast message is relayed
///   only after the owner's ``MeshInput/relayVerdict(stableID:relay:)`` (``RelayGate``).
/// - Frames larger than a link's MTU are cut into v1 fragments (chunk = MTU − 43, ≥ 64, ≤ 256 fragments so
///   Android can reassemble), paced 30 ms apart.
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
        /// Peer-table bound; the least recently seen peer is evicted (O(n) scan, only when full).
        public static let maxPeers = 1_024
        /// iOS high-degree threshold for relay clamps.
        public static let highDegree = 6
        /// Announce-back to a newly verified peer at most once per 5 min.
        public static let announceBackWindowMs: UInt64 = 300_000
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
        public init() {}
    }

    public private(set) var identity: MeshIdentity
    public let configuration: Configuration
    public private(set) var peers: [MeshPeerID: MeshPeer] = [:]
    /// Drop and event counters by name (`decode.truncated.payload`, `drop.duplicate`, `relay.sent`, …).
    public private(set) var counters: [String: Int] = [:]

    private var links: [MeshLinkID: Int] = [:]
    private var linkBinding: [MeshLinkID: MeshPeerID] = [:]
    private var dedup = DedupSet()
    private var gate = RelayGate()
    private var reassembler = Reassembler()
    private var nextAnnounceAt: UInt64 = 0
    private var announcedBackAt: [MeshPeerID: UInt64] = [:]
    /// ms of our last announce: two announces in the same ms would be identical packets (dedup drops the second).
    private var lastAnnounceAt: UInt64 = 0

    public init(identity: MeshIdentity, configuration: Configuration = Configuration()) {
        self.identity = identity
        self.configuration = configuration
    }

    public var linkCount: Int { links.count }
    /// Public messages waiting for the owner's relay verdict.
    public var heldForVerdict: Int { gate.heldCount }
    public func boundPeer(of link: MeshLinkID) -> MeshPeerID? { linkBinding[link] }

    public mutating func handle(
        _ input: MeshInput,
        now: UInt64,
        random: inout some RandomNumberGenerator
    ) -> [MeshAction] {
        var actions: [MeshAction] = []
        switch input {
        case .linkUp(let link, let mtu):
            links[link] = mtu
            // Announce on every new link (§4.7.5): a direct announce binds the link on the far side.
            if let announce = makeAnnounce(now: now) {
                transmit(announce, to: [link], delay: 0, into: &actions)
            }
        case .linkDown(let link):
            links[link] = nil
            if let peer = linkBinding.removeValue(forKey: link), !linkBinding.values.contains(peer) {
                peers[peer]?.isDirect = false
            }
        case .frame(let link, let bytes):
            guard links[link] != nil else {
                count("drop.unknownLink")
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
            if let announce = makeAnnounce(now: now) {
                transmit(announce, to: Array(links.keys).sorted(), delay: 0, into: &actions)
                scheduleNextAnnounce(now: now, random: &random)
            }
        case .originate(var packet, let sign):
            packet.sender = identity.peerID
            packet.timestamp = now
            originate(packet, sign: sign, into: &actions)
        case .relayVerdict(let stableID, let allowed):
            guard let held = gate.resolve(stableID, relay: allowed) else { break }
            if allowed {
                count("relay.gate.released")
                relay(held.packet, from: held.ingress, now: now, random: &random, into: &actions)
            } else {
                count("relay.gate.withheld")
            }
        }
        return actions
    }

    // MARK: Origination

    private mutating func originate(_ packet: MeshPacket, sign: Bool, into actions: inout [MeshAction]) {
        var packet = packet
        packet.ttl = MeshPacket.Limits.originTTL
        if sign {
            guard let signed = try? packet.signed(with: identity.signingKey) else {
                count("originate.signFailed")
                return
            }
            packet = signed
        }
        // Our own packet echoing back must not be processed or relayed again.
        _ = dedup.checkAndInsert(MeshMessageIdentity.dedupKey(packet), now: packet.timestamp)
        count("originate.\(packet.type)")
        transmit(packet, to: Array(links.keys).sorted(), delay: 0, into: &actions)
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
        return try? packet.signed(with: identity.signingKey)
    }

    private mutating func scheduleNextAnnounce(now: UInt64, random: inout some RandomNumberGenerator) {
        let jitter = configuration.announceJitterMs
        let offset = jitter == 0 ? 0 : UInt64.random(in: 0...(2 * jitter), using: &random)
        nextAnnounceAt = now + configuration.announceIntervalMs - jitter + offset
    }

    private mutating func tick(now: UInt64, random: inout some RandomNumberGenerator, into actions: inout [MeshAction]) {
        if !links.isEmpty, now >= nextAnnounceAt {
            if let announce = makeAnnounce(now: now) {
                transmit(announce, to: Array(links.keys).sorted(), delay: 0, into: &actions)
            }
            scheduleNextAnnounce(now: now, random: &random)
        }
        for (id, peer) in peers where now > peer.lastSeen + configuration.peerTimeoutMs {
            peers[id] = nil
            actions.append(.peerLost(id, reason: "timeout"))
        }
        reassembler.sweep(now: now)
        dedup.expire(now: now)
        for _ in gate.expire(now: now) { count("relay.gate.expired") }
    }

    // MARK: Ingress

    private mutating func receive(
        _ bytes: [UInt8],
        on link: MeshLinkID,
        now: UInt64,
        random: inout some RandomNumberGenerator,
        into actions: inout [MeshAction]
    ) {
        let packet: MeshPacket
        do {
            packet = try MeshPacket.decode(bytes)
        } catch {
            count("decode.\(error.name)")
            return
        }
        process(packet, on: link, reassembled: false, now: now, random: &random, into: &actions)
    }

    private mutating func process(
        _ packet: MeshPacket,
        on link: MeshLinkID,
        reassembled: Bool,
        now: UInt64,
        random: inout some RandomNumberGenerator,
        into actions: inout [MeshAction]
    ) {
        if packet.sender == identity.peerID {
            count("drop.ownEcho")
            return
        }
        if packet.isRSR {
            // RSR replies are only accepted for a REQUEST_SYNC we sent in the last 30 s; we send none.
            count("drop.unsolicitedRSR")
            return
        }
        let skew = packet.timestamp > now ? packet.timestamp - now : now - packet.timestamp
        guard skew <= Limits.maxClockSkewMs else {
            count("drop.clockSkew")
            return
        }
        if packet.type == .announce, packet.ttl == MeshPacket.Limits.originTTL, linkBinding[link] == nil, !reassembled {
            linkBinding[link] = packet.sender
        }
        if dedup.checkAndInsert(MeshMessageIdentity.dedupKey(packet), now: now) {
            count("drop.duplicate")
            return
        }
        count(packet.type.name.map { "rx.\($0)" } ?? "rx.unknownType")

        let addressedToUs = packet.recipient == identity.peerID
        var relay = !reassembled && !addressedToUs && packet.type != .requestSync

        switch packet.type {
        case .announce:
            handleAnnounce(packet, on: link, now: now, into: &actions)
        case .message:
            guard packet.isBroadcast || addressedToUs else { break }
            guard let peer = peers[packet.sender] else {
                count("message.unknownSender")
                if withholdUnattributed(packet) { relay = false }
                break
            }
            guard packet.verifySignature(peer.signingPublicKey).isValid else {
                count("message.badSignature")
                if withholdUnattributed(packet) { relay = false }
                break
            }
            guard let text = String(validating: packet.payload, as: UTF8.self) else {
                count("message.invalidUTF8")
                break
            }
            peers[packet.sender]?.lastSeen = now
            let stableID = MeshMessageIdentity.stableID(senderHex: packet.sender.hex, timestampMs: packet.timestamp, content: text)
            actions.append(.publicMessage(MeshPublicMessage(
                sender: packet.sender, nickname: peer.nickname, text: text, timestamp: packet.timestamp,
                stableID: stableID, ttl: packet.ttl
            )))
            if relay, configuration.gatePublicRelays, packet.isBroadcast {
                // The relay waits for the owner's verdict (or follows the one already given).
                let (outcome, evicted) = gate.admit(stableID, packet: packet, ingress: link, now: now)
                if evicted != nil { count("relay.gate.overflow") }
                switch outcome {
                case .held: relay = false
                case .relay: count("relay.gate.cachedRelay")
                case .withhold:
                    count("relay.gate.cachedWithhold")
                    relay = false
                }
            }
        case .leave:
            guard let peer = peers[packet.sender], packet.verifySignature(peer.signingPublicKey).isValid else {
                // A forged leave is neither applied nor relayed (§5.5).
                count("leave.unverified")
                relay = false
                break
            }
            peers[packet.sender] = nil
            actions.append(.peerLost(packet.sender, reason: "leave"))
        case .fragment:
            let fragment: FragmentPayload
            do {
                fragment = try FragmentPayload.decode(packet.payload)
            } catch {
                count("fragment.\(error.name)")
                break
            }
            switch reassembler.add(fragment, from: packet.sender, now: now) {
            case .incomplete:
                break
            case .rejected(let reason):
                count(reason)
            case .complete(let frame):
                do {
                    var inner = try MeshPacket.decode(frame)
                    // The fragments were relayed; the inner packet is processed but not relayed again.
                    inner.ttl = 0
                    count("fragment.reassembled")
                    process(inner, on: link, reassembled: true, now: now, random: &random, into: &actions)
                } catch {
                    count("fragment.inner.\(error.name)")
                }
            }
        case .requestSync:
            // Decoded for robustness and counting; answering gossip sync is optional (§8.4).
            if (try? RequestSyncPayload.decode(packet.payload)) == nil { count("requestSync.malformed") }
        case .nostrCarrier:
            handleCarrier(packet, addressedToUs: addressedToUs, now: now, into: &actions)
        default:
            break
        }

        if relay { self.relay(packet, from: link, now: now, random: &random, into: &actions) }
    }

    private mutating func handleAnnounce(_ packet: MeshPacket, on link: MeshLinkID, now: UInt64, into actions: inout [MeshAction]) {
        let announce: AnnouncePayload
        do {
            announce = try AnnouncePayload.decode(packet.payload)
        } catch {
            count("announce.\(error.name)")
            return
        }
        guard MeshPeerID(noisePublicKey: announce.noisePublicKey) == packet.sender else {
            count("announce.peerIDMismatch")
            return
        }
        guard let signingKey = try? Ed25519PublicKey(rawRepresentation: announce.signingPublicKey),
            packet.verifySignature(signingKey).isValid
        else {
            count("announce.badSignature")
            return
        }
        let existing = peers[packet.sender]
        if let existing, existing.noisePublicKey != announce.noisePublicKey || existing.signingPublicKey != signingKey {
            // TOFU: a rotated key for a known peer ID is refused.
            count("announce.keyChanged")
            return
        }
        let isDirect = linkBinding.values.contains(packet.sender)
        let peer = MeshPeer(
            id: packet.sender, nickname: announce.nickname, noisePublicKey: announce.noisePublicKey,
            signingPublicKey: signingKey, capabilities: announce.capabilities, bridgeGeohash: announce.bridgeGeohash,
            lastSeen: now, isDirect: isDirect
        )
        if existing == nil, peers.count >= Limits.maxPeers,
            let oldest = peers.values.min(by: { $0.lastSeen < $1.lastSeen })
        {
            peers[oldest.id] = nil
            count("peers.evicted")
        }
        peers[packet.sender] = peer
        let changed = existing.map {
            $0.nickname != peer.nickname || $0.capabilities != peer.capabilities
                || $0.bridgeGeohash != peer.bridgeGeohash || $0.isDirect != peer.isDirect
        } ?? true
        if changed { actions.append(.peerVerified(peer)) }
        // Announce back once per peer per window so a newcomer learns us without waiting for the cadence.
        if existing == nil, now >= (announcedBackAt[packet.sender] ?? 0), lastAnnounceAt != now,
            let ours = makeAnnounce(now: now)
        {
            announcedBackAt[packet.sender] = now + Limits.announceBackWindowMs
            if announcedBackAt.count > Limits.maxPeers { announcedBackAt = announcedBackAt.filter { $0.value > now } }
            transmit(ours, to: Array(links.keys).sorted(), delay: 0, into: &actions)
        }
    }

    private mutating func handleCarrier(_ packet: MeshPacket, addressedToUs: Bool, now: UInt64, into actions: inout [MeshAction]) {
        guard addressedToUs || packet.isBroadcast else { return }
        let carrier: NostrCarrierPayload
        do {
            carrier = try NostrCarrierPayload.decode(packet.payload)
        } catch {
            count("carrier.\(error.name)")
            return
        }
        if carrier.direction.isUplink {
            guard addressedToUs else {
                count("carrier.uplinkNotDirected")
                return
            }
            guard let peer = peers[packet.sender], packet.verifySignature(peer.signingPublicKey).isValid else {
                count("carrier.unverifiedDepositor")
                return
            }
        } else if !packet.isBroadcast {
            count("carrier.downlinkDirected")
            return
        }
        actions.append(.carrier(MeshCarrier(sender: packet.sender, payload: carrier, timestamp: packet.timestamp)))
    }

    // MARK: Relay

    private mutating func relay(
        _ packet: MeshPacket,
        from ingress: MeshLinkID,
        now: UInt64,
        random: inout some RandomNumberGenerator,
        into actions: inout [MeshAction]
    ) {
        guard let decision = Self.relayDecision(for: packet, degree: links.count, random: &random) else {
            count("relay.ttlExhausted")
            return
        }
        let fromPeer = linkBinding[ingress]
        var candidates = links.keys.filter { link in
            link != ingress && (fromPeer == nil || linkBinding[link] != fromPeer)
        }.sorted()
        if !packet.isBroadcast, let recipient = packet.recipient {
            let direct = candidates.filter { linkBinding[$0] == recipient }
            if !direct.isEmpty { candidates = direct }
        } else if packet.type != .fragment, packet.type != .announce {
            candidates = Self.fanOutSubset(candidates, dedupKey: MeshMessageIdentity.dedupKey(packet))
        }
        guard !candidates.isEmpty else { return }
        var relayed = packet
        relayed.ttl = decision.ttl
        count("relay.sent")
        transmit(relayed, to: candidates, delay: decision.delayMs, into: &actions)
    }

    /// §7.5: the new TTL and jitter for a relayed packet, or nil when it is not relayed.
    static func relayDecision(
        for packet: MeshPacket,
        degree: Int,
        random: inout some RandomNumberGenerator
    ) -> (ttl: UInt8, delayMs: UInt64)? {
        let cap = min(packet.ttl, MeshPacket.Limits.originTTL)
        guard cap > 1, packet.type != .requestSync else { return nil }
        if !packet.isBroadcast || packet.type == .noiseHandshake {
            let jitter: ClosedRange<UInt64> = packet.type == .noiseHandshake ? 10...35 : 20...60
            return (cap - 1, UInt64.random(in: jitter, using: &random))
        }
        if packet.type == .fragment || packet.type == .voiceFrame {
            let limit = min(cap, degree >= Limits.highDegree ? 5 : 7)
            guard limit > 1 else { return nil }
            return (limit - 1, UInt64.random(in: 8...25, using: &random))
        }
        let limit: UInt8
        if degree <= 2 {
            limit = cap
        } else if degree >= Limits.highDegree {
            limit = max(2, min(cap, 5))
        } else {
            limit = max(2, min(cap, packet.type == .announce ? 7 : 6))
        }
        let jitter: ClosedRange<UInt64> =
            switch degree {
            case ...2: 10...40
            case 3...5: 60...150
            case 6...9: 80...180
            default: 100...220
            }
        return (limit - 1, UInt64.random(in: jitter, using: &random))
    }

    /// §7.6: k = n for n ≤ 2, else min(n, bitLength(n − 1) + 1) links, ranked by SHA-256("<key>::<link>").
    static func fanOutSubset(_ links: [MeshLinkID], dedupKey: String) -> [MeshLinkID] {
        let n = links.count
        guard n > 2 else { return links }
        let k = min(n, (Int.bitWidth - (n - 1).leadingZeroBitCount) + 1)
        let ranked = links.map { link in (link, SHA256.hash(utf8: dedupKey + "::" + String(link.rawValue))) }
            .sorted { $0.1.lexicographicallyPrecedes($1.1) }
        return ranked.prefix(k).map(\.0).sorted()
    }

    // MARK: Transmit and fragmentation

    /// Sends `packet` on `targets`: whole where it fits the link's MTU, otherwise as one fragment set cut for
    /// the smallest MTU among the links that need it.
    private mutating func transmit(_ packet: MeshPacket, to targets: [MeshLinkID], delay: UInt64, into actions: inout [MeshAction]) {
        guard !targets.isEmpty else { return }
        let frame: [UInt8]
        do {
            frame = try packet.encode(padding: packet.type.isNoise)
        } catch {
            count("tx.\(error.name)")
            return
        }
        var needFragments: [MeshLinkID] = []
        for link in targets {
            guard let mtu = links[link] else { continue }
            if frame.count <= mtu {
                actions.append(.transmit(link: link, frame: frame, delayMs: delay))
            } else {
                needFragments.append(link)
            }
        }
        guard !needFragments.isEmpty else { return }
        let mtu = needFragments.compactMap { links[$0] }.min() ?? 0
        guard let fragments = fragmentFrames(of: packet, frame: frame, mtu: mtu) else {
            count("tx.cannotFragment")
            return
        }
        count("tx.fragmented")
        for link in needFragments {
            for (index, fragment) in fragments.enumerated() {
                actions.append(.transmit(link: link, frame: fragment, delayMs: delay + UInt64(index) * configuration.fragmentSpacingMs))
            }
        }
    }

    /// The fragment frames for `frame` so that every one fits `mtu`; nil (counted) if impossible.
    func fragmentFrames(of packet: MeshPacket, frame: [UInt8], mtu: Int) -> [[UInt8]]? {
        let chunk = max(Limits.minimumChunk, mtu - Limits.fragmentOverhead)
        let total = (frame.count + chunk - 1) / chunk
        guard total <= Limits.maxFragmentsPerFrame else { return nil }
        // Fragment IDs need only be unique per (sender, stream). Derive them from the frame, the chunk size
        // and our own ID so the engine stays deterministic, and two relays cutting the same frame differently
        // never share an ID.
        var seed = frame
        seed.append(contentsOf: identity.peerID.bytes)
        seed.append(UInt8(truncatingIfNeeded: chunk >> 8))
        seed.append(UInt8(truncatingIfNeeded: chunk))
        let id = SHA256.hash(seed).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        var frames: [[UInt8]] = []
        for index in 0..<total {
            let start = index * chunk
            let piece = Array(frame[start..<min(frame.count, start + chunk)])
            let payload = FragmentPayload(
                fragmentID: id, index: UInt16(index), total: UInt16(total), originalType: packet.type, chunk: piece
            ).encode()
            let carrier = MeshPacket(
                version: packet.route.isEmpty ? 1 : 2, type: .fragment, ttl: packet.ttl, timestamp: packet.timestamp,
                sender: packet.sender, recipient: packet.recipient, route: packet.route, payload: payload
            )
            guard let encoded = try? carrier.encode(compression: .none), encoded.count <= mtu else { return nil }
            frames.append(encoded)
        }
        return frames
    }

    /// With the relay gate on, a public broadcast message the engine cannot attribute — no verified announce
    /// for its sender, or a signature that does not match the pinned key — is not relayed by the bridge:
    /// nothing can judge it (SPAM-FILTER §1 wants hidden messages not relayed, and an unannounced sender
    /// would otherwise be a way around the filter), and the bridge never bridges it either. Other peers
    /// in range relay it as usual; a phone whose announce the bridge missed is relayed again once its next
    /// announce arrives. Counted `relay.gate.unattributed`.
    private mutating func withholdUnattributed(_ packet: MeshPacket) -> Bool {
        guard configuration.gatePublicRelays, packet.isBroadcast else { return false }
        count("relay.gate.unattributed")
        return true
    }

    private mutating func count(_ name: String) { counters[name, default: 0] += 1 }
}
