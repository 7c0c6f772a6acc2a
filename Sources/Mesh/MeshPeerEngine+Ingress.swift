import BitchatWire
import BotCrypto
import BotSupport
import MeshSync

/// Ingress (MESH-WIRE §4, §7): a frame decoded, deduplicated, verified and handled by type (messages, fragments,
/// announces, carriers), before any relay.
extension MeshPeerEngine {
    // MARK: Ingress

    mutating func receive(
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
            counters.decode.add(MeshDecodeRejection(.frame, error))
            return
        }
        process(packet, on: link, reassembled: false, now: now, random: &random, into: &actions)
    }

    mutating func process(
        _ packet: MeshPacket,
        on link: MeshLinkID,
        reassembled: Bool,
        now: UInt64,
        random: inout some RandomNumberGenerator,
        into actions: inout [MeshAction]
    ) {
        guard let key = admit(packet, on: link, reassembled: reassembled, now: now, into: &actions) else { return }
        counters.received.add(packet.type)

        let addressedToUs = packet.recipient == identity.peerID
        var relay = !reassembled && !addressedToUs && packet.type != .requestSync
        let assessment: Assessment
        switch packet.type {
        case .announce:
            assessment = handleAnnounce(packet, on: link, now: now, into: &actions)
        case .message:
            assessment = handleMessage(packet, on: link, addressedToUs: addressedToUs, now: now, relay: &relay, into: &actions)
        case .leave:
            if let signer = signingKey(of: packet.sender), packet.verifySignature(signer.key).isValid {
                // Pool and relay are decided before the peer leaves the table.
                remember(key: key, of: packet, .verified, now: now)
                if signer.live {
                    table.remove(packet.sender)
                    lost(packet.sender, .leave, into: &actions)
                } else {
                    counters.pins.add(.verifiedByPin)
                }
                if relay { self.relay(packet, from: link, now: now, random: &random, into: &actions) }
                return
            }
            // A forged leave is neither applied nor relayed (§5.5).
            counters.verification.add(.leaveUnverified)
            assessment = .rejected
        case .fragment:
            assessment = handleFragment(packet, on: link, addressedToUs: addressedToUs, now: now, random: &random, into: &actions)
        case .requestSync:
            assessment = handleSyncRequest(packet, on: link, into: &actions)
        case .boardPost where syncRequester != nil:
            // The owner's board store decides; only an accepted post or tombstone is relayed (BOARD.md §7).
            actions.append(.boardPacket(packet, link: link))
            relay = false
            assessment = .unverified
        case .nostrCarrier:
            assessment = handleCarrier(packet, addressedToUs: addressedToUs, now: now, into: &actions)
        case .courierEnvelope where addressedToUs:
            assessment = handleCourierDeposit(packet, on: link, now: now, into: &actions)
        case .voiceFrame where packet.isBroadcast, .fileTransfer where packet.isBroadcast, .boardPost where packet.isBroadcast:
            assessment = verifyMedia(packet)
            if packet.type == .boardPost { actions.append(.boardHeard(packet)) }
        default:
            assessment = .unverified
        }
        remember(key: key, of: packet, assessment, now: now)
        if syncRequester != nil, assessment == .verified, packet.isBroadcast, packet.type == .announce || packet.type == .message {
            actions.append(.syncStore(packet))
        }
        if assessment == .rejected {
            if relay { counters.relay.add(.refusedRejected) }
            return
        }
        if relay { self.relay(packet, from: link, now: now, random: &random, into: &actions) }
    }

    /// The checks before a packet's type is looked at: not our own echo, an RSR reply only to our request, the clock
    /// within the skew, not a duplicate. Its dedup key when it passes; nil (counted) when not.
    mutating func admit(
        _ packet: MeshPacket, on link: MeshLinkID, reassembled: Bool, now: UInt64, into actions: inout [MeshAction]
    ) -> DedupSet.Key? {
        if packet.sender == identity.peerID || ownSenders[packet.sender].map({ now < $0 + Limits.ownSenderWindowMs }) == true {
            counters.ingress.add(.ownEcho)
            return nil
        }
        if packet.isRSR {
            // RSR replies are only accepted for a REQUEST_SYNC we sent in the last 30 s to a direct peer of the
            // link (on a link with none: to the claimed sender); then the timestamp is not checked (§7.4).
            guard let requester = syncRequester,
                  requester.acceptsReply(linkPeers: bindings.peers(on: link), sender: packet.sender, now: now)
            else {
                counters.ingress.add(.unsolicitedRSR)
                return nil
            }
        }
        let skew = packet.timestamp > now ? packet.timestamp - now : now - packet.timestamp
        guard packet.isRSR || skew <= Limits.maxClockSkewMs else {
            counters.ingress.add(.clockSkew)
            return nil
        }
        let key = DedupSet.Key(packet)
        if let pool = dedup.lookup(key, now: now) {
            counters.dedup.add(MeshDedupEvent(.duplicate, pool))
            // The same verified origin-TTL announce on a second link (a phone connected both ways over BLE):
            // its sender is direct there too.
            if pool != .unverified, packet.type == .announce, packet.ttl == MeshPacket.Limits.originTTL, !reassembled,
               table[packet.sender] != nil, markDirect(packet.sender, on: link, now: now, into: &actions)
            {
                report(table.setDirect(packet.sender, true, counters: &counters), into: &actions)
            }
            return nil
        }
        return key
    }

    /// A REQUEST_SYNC: decoded for robustness and counting; with sync on, the owner's responder makes every check (§9.4).
    mutating func handleSyncRequest(_ packet: MeshPacket, on link: MeshLinkID, into actions: inout [MeshAction]) -> Assessment {
        do {
            _ = try RequestSyncPayload.decode(packet.payload)
        } catch {
            counters.decode.add(MeshDecodeRejection(.requestSync, error))
            return .rejected
        }
        if syncRequester != nil {
            actions.append(.syncRequest(link: link, SyncRequestInput(
                packet: packet, linkPeers: bindings.peers(on: link), pinnedKey: table.signingKey(of: packet.sender))))
        }
        return .unverified
    }

    /// Puts the packet's dedup key in the pool its assessment and its sender's standing choose.
    mutating func remember(key: DedupSet.Key, of packet: MeshPacket, _ assessment: Assessment, now: UInt64) {
        let pool: DedupPool =
            switch assessment {
            case .verified: table.isEstablished(packet.sender) ? .established : .firstContact
            case .unverified, .rejected: .unverified
            }
        let evicted = dedup.insert(key, into: pool, now: now)
        if evicted > 0 { counters.dedup.add(MeshDedupEvent(.evicted, pool), evicted) }
    }

    mutating func handleMessage(
        _ packet: MeshPacket,
        on link: MeshLinkID,
        addressedToUs: Bool,
        now: UInt64,
        relay: inout Bool,
        into actions: inout [MeshAction]
    ) -> Assessment {
        guard packet.isBroadcast || addressedToUs else { return .unverified }
        let live = table[packet.sender]
        guard let pin = live.map(MeshPin.init) ?? pinBook[packet.sender] else {
            counters.verification.add(.messageUnknownSender)
            if withholdUnattributed(packet) { relay = false }
            return .unverified
        }
        guard packet.verifySignature(pin.signingPublicKey).isValid else {
            counters.verification.add(.messageBadSignature)
            if withholdUnattributed(packet) { relay = false }
            return .unverified
        }
        guard let text = String(validating: packet.payload, as: UTF8.self) else {
            counters.verification.add(.messageInvalidUTF8)
            return .rejected
        }
        if live != nil {
            noteTraffic(from: packet.sender, now: now, into: &actions)
        } else {
            counters.pins.add(.verifiedByPin)
        }
        let stableID = MeshMessageIdentity.stableID(senderHex: packet.sender.hex, timestampMs: packet.timestamp, content: text)
        actions.append(.publicMessage(MeshPublicMessage(
            sender: packet.sender, nickname: pin.nickname, text: text, timestamp: packet.timestamp,
            stableID: stableID, ttl: packet.ttl, noisePublicKey: pin.noisePublicKey
        )))
        if relay, configuration.gatePublicRelays, packet.isBroadcast {
            // The relay waits for the owner's verdict (or follows the one already given).
            let (outcome, evicted) = gate.admit(stableID, packet: packet, ingress: link, now: now)
            if evicted != nil { counters.relayGate.add(.overflow) }
            switch outcome {
            case .held: relay = false
            case .relay: counters.relayGate.add(.cachedRelay)
            case .withhold:
                counters.relayGate.add(.cachedWithhold)
                relay = false
            }
        }
        return .verified
    }

    /// Broadcast voice frames, file transfers and board posts are signed (MESH-WIRE §4.2) and iOS relays
    /// them only when the signature verifies (§7.5): the engine does not process them otherwise, but a
    /// relay of an unverifiable one would carry a forgery to the next island. Only the sender's key from a
    /// verified announce in the table counts; a sender without one cannot be verified, so is not relayed
    /// by this peer either (as unattributed public messages are not). Fragments of them are relayed before
    /// any check is possible (fragments carry no signature, §4.2).
    mutating func verifyMedia(_ packet: MeshPacket) -> Assessment {
        guard let signingKey = table.signingKey(of: packet.sender) else {
            counters.verification.add(.mediaUnknownSender)
            return .rejected
        }
        guard packet.verifySignature(signingKey).isValid else {
            counters.verification.add(.mediaBadSignature)
            return .rejected
        }
        return .verified
    }

    /// Original types this engine processes after reassembly; fragments of other types are relayed only.
    static let reassembledTypes: Set<MessageType> = [.announce, .message, .leave, .nostrCarrier, .courierEnvelope]

    mutating func handleFragment(
        _ packet: MeshPacket,
        on link: MeshLinkID,
        addressedToUs: Bool,
        now: UInt64,
        random: inout some RandomNumberGenerator,
        into actions: inout [MeshAction]
    ) -> Assessment {
        let fragment: FragmentPayload
        do {
            fragment = try FragmentPayload.decode(packet.payload)
        } catch {
            counters.decode.add(MeshDecodeRejection(.fragment, error))
            return .rejected
        }
        guard packet.isBroadcast || addressedToUs, Self.reassembledTypes.contains(fragment.originalType) else {
            counters.fragment.add(.notForUs)
            return .unverified
        }
        let outcome = reassembler.add(fragment, from: packet.sender, trusted: signingKey(of: packet.sender) != nil, now: now)
        counters.fragment.merge(reassembler.takeEvents())
        switch outcome {
        case .incomplete:
            return .unverified
        case .rejected(let reason):
            counters.fragment.add(reason)
            return .rejected
        case .complete(let frame):
            do {
                var inner = try MeshPacket.decode(frame)
                // The fragments were relayed; the inner packet is processed but not relayed again.
                inner.ttl = 0
                counters.fragment.add(.reassembled)
                process(inner, on: link, reassembled: true, now: now, random: &random, into: &actions)
            } catch {
                counters.decode.add(MeshDecodeRejection(.fragmentInner, error))
            }
            return .unverified
        }
    }

    mutating func handleAnnounce(
        _ packet: MeshPacket, on link: MeshLinkID, now: UInt64, into actions: inout [MeshAction]
    ) -> Assessment {
        let announce: AnnouncePayload
        do {
            announce = try AnnouncePayload.decode(packet.payload)
        } catch {
            counters.decode.add(MeshDecodeRejection(.announce, error))
            return .rejected
        }
        guard MeshPeerID(noisePublicKey: announce.noisePublicKey) == packet.sender else {
            counters.verification.add(.announcePeerIDMismatch)
            return .rejected
        }
        guard let signingKey = try? Ed25519PublicKey(rawRepresentation: announce.signingPublicKey),
            packet.verifySignature(signingKey).isValid
        else {
            counters.verification.add(.announceBadSignature)
            return .rejected
        }
        let existing = table[packet.sender]
        let claimed = MeshPin(noisePublicKey: announce.noisePublicKey, signingPublicKey: signingKey, nickname: announce.nickname)
        let conflictsLive = existing.map { $0.noisePublicKey != announce.noisePublicKey || $0.signingPublicKey != signingKey } ?? false
        if conflictsLive || pinBook.check(packet.sender, noiseKey: announce.noisePublicKey, signingKey: signingKey) == .conflicts {
            // TOFU: other keys for a pinned peer ID are refused, in the live table or beyond it; nothing is
            // refreshed (the real peer keeps its standing and its pin).
            counters.verification.add(.announceKeyChanged)
            counters.pins.add(.refused)
            actions.append(.pinRefused(announced: claimed))
            return .rejected
        }
        if !pinBook.pin(claimed) { counters.pins.add(.bookFull) }
        // A verified announce at origin TTL, not reassembled (reassembled packets carry TTL 0): the sender is a
        // direct peer of this link — one of several on a shared segment.
        if packet.ttl == MeshPacket.Limits.originTTL { markDirect(packet.sender, on: link, now: now, into: &actions) }
        let peer = MeshPeer(
            id: packet.sender, nickname: announce.nickname, noisePublicKey: announce.noisePublicKey,
            signingPublicKey: signingKey, capabilities: announce.capabilities, bridgeGeohash: announce.bridgeGeohash,
            lastSeen: now, isDirect: bindings.isDirect(packet.sender)
        )
        peerExpiry = min(peerExpiry, now &+ configuration.peerTimeoutMs)
        let evicted = table.recordAnnounce(peer, now: now, counters: &counters)
        report(evicted, into: &actions)
        for id in evicted { announcedBackAt[id] = nil }
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
        return .verified
    }

    mutating func handleCarrier(
        _ packet: MeshPacket, addressedToUs: Bool, now: UInt64, into actions: inout [MeshAction]
    ) -> Assessment {
        guard addressedToUs || packet.isBroadcast else { return .unverified }
        let carrier: NostrCarrierPayload
        do {
            carrier = try NostrCarrierPayload.decode(packet.payload)
        } catch {
            counters.decode.add(MeshDecodeRejection(.carrier, error))
            return .rejected
        }
        var assessment = Assessment.unverified
        var signed = false
        if carrier.direction.isUplink {
            guard addressedToUs else {
                counters.carrier.add(.uplinkNotDirected)
                return .rejected
            }
            guard let signer = signingKey(of: packet.sender), packet.verifySignature(signer.key).isValid else {
                counters.carrier.add(.unverifiedDepositor)
                return .rejected
            }
            if signer.live {
                noteTraffic(from: packet.sender, now: now, into: &actions)
            } else {
                counters.pins.add(.verifiedByPin)
            }
            assessment = .verified
            signed = true
        } else if !packet.isBroadcast {
            counters.carrier.add(.downlinkDirected)
            return .rejected
        } else if packet.signature != nil, let signer = signingKey(of: packet.sender) {
            signed = packet.verifySignature(signer.key).isValid
        }
        actions.append(.carrier(MeshCarrier(sender: packet.sender, payload: carrier, timestamp: packet.timestamp, packetSigned: signed)))
        return assessment
    }

    /// A 0x04 addressed to us: a deposit when its sender is a direct peer of the link it came on (the last hop is the
    /// depositor; relayed deposits are refused) and its signature verifies against the sender's key (COURIER.md §2.5).
    /// The envelope itself is the owner's to check.
    mutating func handleCourierDeposit(_ packet: MeshPacket, on link: MeshLinkID, now: UInt64, into actions: inout [MeshAction]) -> Assessment {
        guard bindings.peers(on: link).contains(packet.sender) else {
            counters.courier.add(.notDirect)
            return .rejected
        }
        guard let signer = signingKey(of: packet.sender), packet.verifySignature(signer.key).isValid else {
            counters.courier.add(.unverifiedDepositor)
            return .rejected
        }
        if signer.live { noteTraffic(from: packet.sender, now: now, into: &actions) }
        actions.append(.courierDeposit(from: packet.sender, envelope: packet.payload))
        return .verified
    }
}
