import BitchatWire
import BotSupport
import BotCrypto

/// Relaying (MESH-WIRE §7.5, §7.6), transmission and fragmentation (§6.2).
extension MeshPeerEngine {
    // MARK: Relay

    mutating func relay(
        _ packet: MeshPacket,
        from ingress: MeshLinkID,
        now: UInt64,
        random: inout some RandomNumberGenerator,
        into actions: inout [MeshAction]
    ) {
        guard let decision = Self.relayDecision(for: packet, degree: links.count, random: &random) else {
            counters.relay.add(.ttlExhausted)
            return
        }
        // Split horizon per link: never back onto the ingress link, nor onto a link whose direct peers all
        // heard this frame already (each is also a direct peer of the ingress link, where everyone hears every
        // frame: a phone connected to us twice, or a segment's phones that are also on another segment).
        let heard = bindings.peers(on: ingress)
        var candidates = links.keys.filter { link in
            guard link != ingress else { return false }
            let peers = bindings.peers(on: link)
            return peers.isEmpty || !peers.isSubset(of: heard)
        }.sorted()
        if !packet.isBroadcast, let recipient = packet.recipient {
            let direct = candidates.filter { bindings.peers(on: $0).contains(recipient) }
            if !direct.isEmpty { candidates = direct }
        } else if packet.type != .fragment, packet.type != .announce {
            candidates = Self.fanOutSubset(candidates, dedupKey: MeshMessageIdentity.dedupKey(packet))
        }
        guard !candidates.isEmpty else { return }
        var relayed = packet
        relayed.ttl = decision.ttl
        counters.relay.add(.sent)
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
        let limit = BroadcastRelay.limit(
            cap: cap, degree: degree, priority: packet.type == .announce || Self.isUrgentBoardPost(packet) ? 7 : 6)
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
    mutating func transmit(_ packet: MeshPacket, to targets: [MeshLinkID], delay: UInt64, into actions: inout [MeshAction]) {
        guard !targets.isEmpty else { return }
        let frame: [UInt8]
        do {
            frame = try packet.encode(padding: packet.type.isNoise)
        } catch {
            counters.decode.add(MeshDecodeRejection(.transmit, error))
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
            counters.transmit.add(.cannotFragment)
            return
        }
        counters.transmit.add(.fragmented)
        for link in needFragments {
            for (index, fragment) in fragments.enumerated() {
                actions.append(.transmit(link: link, frame: fragment, delayMs: delay + UInt64(index) * configuration.fragmentSpacingMs))
            }
        }
    }

    /// BOARD.md §7: an urgent board post (the first flags TLV, iOS `BoardWire.urgentFlag`) gains a hop at degree 3…5.
    static func isUrgentBoardPost(_ packet: MeshPacket) -> Bool {
        packet.type == .boardPost && BoardPayload.urgentFlag(in: packet.payload)
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
    mutating func withholdUnattributed(_ packet: MeshPacket) -> Bool {
        guard configuration.gatePublicRelays, packet.isBroadcast else { return false }
        counters.relayGate.add(.unattributed)
        return true
    }
}
