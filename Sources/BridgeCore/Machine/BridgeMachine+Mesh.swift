import BitchatWire
import BotCrypto
import BotSupport
import Identity
import Mesh
import MeshSync
import Nostr

/// The machine's mesh side: verified and lost peers (the island's other bridges), public messages and carriers
/// to the router, gossip sync requests and rounds answered from the sync stores, verified packets kept for sync
/// (a message only once the judgement passed it), board packets judged, kept, relayed and copied to Nostr.
extension BridgeMachine {
    mutating func mesh(_ action: MeshAction, now: Double) -> [Action] {
        let nowMs = Self.ms(now)
        switch action {
        case .peerVerified(let peer):
            var actions: [Action] = [.log(LogLine(.debug, "peer verified", [("mesh.peer", .string(peer.id.hex))]))]
            if let sighting = try? IdentitySighting.mesh(
                noiseKey: peer.noisePublicKey, signingKey: peer.signingPublicKey.rawRepresentation, peerID: peer.id.rawValue,
                nickname: peer.nickname)
            {
                actions.append(.sighting(sighting))
            }
            return actions + (peers.verified(peer) ? islandChanged(now: now) : [])
        case .peerLost(let id, _):
            return peers.lost(id) ? islandChanged(now: now) : []
        case .peersResync(let table):
            // Peer changes were dropped while the executor fell behind (a flood): the engine's table is the truth.
            return peers.resync(table) ? islandChanged(now: now) : []
        case .publicMessage(let message):
            // A peer outside the live table that verified against its pin carries its Noise key with it.
            let noise = message.noisePublicKey ?? peers.noiseKeys[message.sender]
            let fingerprint = noise.map { Hex.encode(SHA256.hash($0)) }
            let identity = noise.flatMap { try? IdentityKey.mesh(noiseKey: $0) }
            let senderKey = fingerprint ?? message.sender.hex
            return perform(
                router.meshMessage(message, senderKey: senderKey, identity: identity, now: now), now: now,
                judged: .meshMessage(message, senderKey: senderKey))
        case .carrier(let carrier):
            let routed = router.meshCarrier(carrier, now: now)
            // A hidden deposit is held for a release: its event read back from the carrier (the router verified it;
            // only hides pay for reading it again).
            let hidden = routed.contains { if case .recordHidden(let report) = $0 { !report.shadow } else { false } }
            let event = hidden ? try? UnverifiedEvent(json: String(decoding: carrier.payload.eventJSON, as: UTF8.self)).verified() : nil
            return perform(routed, now: now, judged: event.map { .deposit($0, depositor: carrier.sender) })
        case .courierDeposit, .courierSent:
            // The courier gateway's (``courierInput(_:)``).
            return []
        case .syncRequest(let link, let input):
            guard var responder else { return [] }
            let answers = responder.receive(input, route: link.rawValue, from: &sync, now: nowMs)
            self.responder = responder
            if answers.isEmpty {
                return [.log(LogLine(.debug, "sync request", [("mesh.peer", .string(input.packet.sender.hex)), ("sync.outcome", .string("deferred"))]))]
            }
            return sent(answers)
        case .syncRoundDue(let round):
            guard responder != nil else { return [] }
            return [.mesh(.sendSyncRequest(peer: round.peer, payload: SyncRequester.payload(types: round.types, from: sync, now: nowMs)))]
        case .syncStore(let packet):
            return keepForSync(packet, now: nowMs)
        case .originated(let packet):
            return keepOwn(packet, now: nowMs)
        case .boardPacket(let packet, let link):
            return boardPacket(packet, from: link, now: now)
        case .transmit, .pinRefused, .boardHeard:
            // Transmits are the node's; pin refusals are the executor's store work; with gossip sync on, board
            // packets arrive as `.boardPacket`.
            return []
        }
    }

    /// Sync answers onto their links, each logged.
    func sent(_ answers: [SyncResponder.RoutedAnswer]) -> [Action] {
        answers.flatMap { routed -> [Action] in
            let answer = routed.answer
            let line = LogLine(.debug, "sync request", [
                ("mesh.peer", .string(answer.recipient.hex)), ("sync.outcome", .string(answer.refusal?.rawValue ?? "answered")),
                ("sync.replies", .integer(Int64(answer.frames.count))), ("sync.withheld", .integer(Int64(answer.withheld))),
            ])
            return [.log(line)] + (answer.frames.isEmpty ? [] : [.mesh(.sendSyncReplies(link: MeshLinkID(routed.route), frames: answer.frames))])
        }
    }

    /// Requests whose link's turn has come (``SyncResponder/Pacing``).
    mutating func dueSyncAnswers(now: Double) -> [Action] {
        guard var responder, let due = responder.nextDue, due <= Self.ms(now) else { return [] }
        let answers = responder.due(from: &sync, now: Self.ms(now))
        self.responder = responder
        return sent(answers)
    }

    /// Hands a changed set of island bridges to the airtime machine (which may take over downlinks of a bridge that left)
    /// and logs the change: `island.gateways` / `island.bridges` list the other bridges' peer IDs.
    private mutating func islandChanged(now: Double) -> [Action] {
        let before = airtime.counters.takenOver
        airtime.setIslandBridges(own: ownPeerID, gateways: peers.gateways, rendezvous: peers.rendezvous, now: now)
        return [.log(LogLine(.info, "island bridges", [
            ("island.gateways", .array(peers.gateways.sorted().map { .string($0.hex) })),
            ("island.bridges", .array(peers.rendezvous.sorted().map { .string($0.hex) })),
            ("downlinks.taken_over", .integer(Int64(airtime.counters.takenOver - before))),
        ]))]
    }

    /// A verified packet the engine offers for sync: kept (and persisted) when new; a public message only when
    /// the judgement passed it (the verdict of the message the engine reported just before).
    private mutating func keepForSync(_ packet: MeshPacket, now: UInt64) -> [Action] {
        guard responder != nil, let stored = try? SyncPacket(packet) else { return [] }
        if packet.type == .message {
            guard let text = String(validating: packet.payload, as: UTF8.self) else { return [] }
            let stableID = MeshMessageIdentity.stableID(senderHex: packet.sender.hex, timestampMs: packet.timestamp, content: text)
            guard let verdict = lastMeshVerdict, verdict.stableID == stableID, verdict.relay else { return [] }
        }
        let (outcome, changes) = sync.record(stored, now: now)
        var actions: [Action] = changes.isEmpty ? [] : [.syncChanges(changes)]
        if outcome == .stored, let kind = SyncStoreKind(type: packet.type) {
            counters.syncStored.add(kind)
            actions.append(.log(LogLine(.debug, "kept for sync", [("sync.kind", .string(kind.rawValue)), ("packet.id", .string(Hex.encode(stored.id)))])))
        }
        return actions
    }

    /// A packet the bridge sent that phones keep (a persona's announce or line): kept for sync, so the bridge's
    /// REQUEST_SYNC filter covers it and no phone sends it back (APP-BEHAVIOUR §2). A persona's packets are kept as they
    /// are made (``broadcast(_:id:now:)``, before the node sends them): its ``MeshAction/originated(_:)`` is then a
    /// duplicate. (The engine puts the bridge's own latest announce in every request's filter itself.)
    mutating func keepOwn(_ packet: MeshPacket, now: UInt64) -> [Action] {
        guard responder != nil, let stored = try? SyncPacket(packet) else { return [] }
        let (outcome, changes) = sync.record(stored, now: now)
        if outcome == .stored, let kind = SyncStoreKind(type: packet.type) { counters.syncStored.add(kind) }
        return changes.isEmpty ? [] : [.syncChanges(changes)]
    }

    /// A board packet heard on the mesh: a verified post is judged like a message first (issue 17) — a hidden one
    /// is neither kept nor relayed; then the store decides, and only what it accepted is relayed and copied.
    private mutating func boardPacket(_ packet: MeshPacket, from link: MeshLinkID, now: Double) -> [Action] {
        guard responder != nil, let stored = try? SyncPacket(packet) else { return [] }
        var actions: [Action] = []
        if case .post(let post)? = try? BoardPayload.decode(packet.payload), post.isSignatureValid {
            let (admitted, judged) = admitBoardPost(post, now: now)
            actions += judged
            guard admitted else {
                counters.boardPackets.add(.hidden)
                return actions
            }
        }
        let (outcome, changes) = sync.ingest(stored, now: Self.ms(now))
        if !changes.isEmpty { actions.append(.syncChanges(changes)) }
        switch outcome {
        case .accepted(let deletedPost):
            counters.boardPackets.add(.accepted)
            actions.append(.mesh(.relayBoard(packet, from: link)))
            actions += copyToNostr(stored, deletedPost: deletedPost, now: now)
        case .duplicate: counters.boardPackets.add(.duplicate)
        case .rejected(let reason): counters.boardPackets.add(.rejected(reason))
        }
        return actions
    }
}
