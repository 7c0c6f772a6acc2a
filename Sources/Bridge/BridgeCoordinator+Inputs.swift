import BitchatWire
import BotCrypto
import BotStorage
import BotSupport
import Geohash
import IdentityCache
import Mesh
import ModerationLog
import MeshSync
import Nostr
import SpamFilter
import Synchronization
import Identity
import BridgeCore

/// The coordinator's intake: events from the relay pool (channel and rendezvous events to the router, fleet
/// lists, board notes and deletions) and the mesh node's actions (verified and lost peers, which set the
/// island's bridges; public messages, carriers, sync requests and rounds, board packets).
extension BridgeCoordinator {
    func handle(_ input: BridgeRelayInput) {
        let now = dependencies.unixNow()
        switch input {
        case .event(let event):
            guard !intakeStopped else { return }
            if fleet != nil, FleetListState.isCandidate(event) {
                offerFleetList(event, from: "relay")
                return
            }
            // Kind-1 notes and kind 5 (the `board-<geohash>` subscription) tell which board posts are on Nostr
            // already, and may carry another island's board packet; nothing is minted from them (BOARD.md §11).
            if event.kind == BoardNostrCopy.textNoteKind || event.kind == BoardNostrCopy.deletionKind {
                if event.kind == BoardNostrCopy.textNoteKind { boardNotes.record(event) }
                carryFromNostr(event, now: now)
                return
            }
            // Debug level: the soak scripts count what the relays delivered from this line.
            logger.debug("relay event", [("event.id", .string(event.id.hex))])
            recordSighting(try? .nostr(pubkey: event.pubkey.bytes, nickname: event.firstTag("n").flatMap { $0.count > 1 ? $0[1] : nil }))
            // Queue priority, never a skipped check: the pool verified this event's signature already, so
            // `protected` is the operator's word about a key that really signed it.
            let key = try? IdentityKey.nostr(pubkey: event.pubkey.bytes)
            var protected = false
            if let key, let lists = lastReadablePolicy { protected = lists.allowed.contains(key) || lists.verified.contains(key) }
            currentEvent = event
            perform(router.relayEvent(event, now: now, random: dependencies.unitRandom(), protected: protected))
            currentEvent = nil
        case .connectedRelays(let count):
            connectedRelays = count
            perform(router.relaysConnected(count > 0, now: now))
        case .accepted(let id):
            guard let uplinks = stores.uplinks else { return }
            do {
                if try uplinks.remove(id) { logger.debug("uplink acknowledged", [("event.id", .string(id.hex))]) }
            } catch {
                failed(\.failedUplinkWrites, "uplink store write failed; the uplink is published but would not survive a stop",
                       error, id: id)
            }
        }
        rescheduleTick(now: now)
    }

    /// Hands a changed set of island bridges to the router (which may take over downlinks of a bridge that
    /// left) and logs the change: `island.gateways` / `island.bridges` list the other bridges' peer IDs.
    private func updateIsland(gateways: Set<MeshPeerID>, rendezvous: Set<MeshPeerID>, now: Double) {
        guard gateways != islandGateways || rendezvous != islandRendezvous else { return }
        islandGateways = gateways
        islandRendezvous = rendezvous
        let before = router.counters.downlinksTakenOver
        router.setIslandBridges(own: ownPeerID, gateways: gateways, rendezvous: rendezvous, now: now)
        logger.info("island bridges", [
            ("island.gateways", .array(gateways.sorted().map { .string($0.hex) })),
            ("island.bridges", .array(rendezvous.sorted().map { .string($0.hex) })),
            ("downlinks.taken_over", .integer(Int64(router.counters.downlinksTakenOver - before))),
        ])
        rescheduleTick(now: now)
    }

    func handle(_ action: MeshAction) {
        guard !intakeStopped else { return }
        let now = dependencies.unixNow()
        switch action {
        case .peerVerified(let peer):
            let sighting = try? PeerIdentityCache.Sighting.mesh(
                noiseKey: peer.noisePublicKey, signingKey: peer.signingPublicKey.rawRepresentation, peerID: peer.id.rawValue,
                nickname: peer.nickname)
            recordSighting(sighting)
            peerNoiseKeys[peer.id] = peer.noisePublicKey
            peerSigningKeys[peer.id] = peer.signingPublicKey.rawRepresentation
            // Any verified peer counts, direct or relayed: its announce crossed this island's radio, so its
            // broadcasts reach the same phones.
            let capabilities = peer.capabilities ?? []
            var gateways = islandGateways
            var rendezvous = islandRendezvous
            if capabilities.contains(.gateway) { gateways.insert(peer.id) } else { gateways.remove(peer.id) }
            if capabilities.contains(.bridge) { rendezvous.insert(peer.id) } else { rendezvous.remove(peer.id) }
            updateIsland(gateways: gateways, rendezvous: rendezvous, now: now)
        case .peerLost(let id, _):
            peerNoiseKeys[id] = nil
            peerSigningKeys[id] = nil
            updateIsland(gateways: islandGateways.subtracting([id]), rendezvous: islandRendezvous.subtracting([id]), now: now)
        case .peersResync(let peers):
            // Peer changes were dropped while this coordinator fell behind (a flood): the engine's table is the
            // truth. Without this, a lost peer missed here stayed in the gauge and the island sets for good.
            peerNoiseKeys = Dictionary(uniqueKeysWithValues: peers.map { ($0.id, $0.noisePublicKey) })
            peerSigningKeys = Dictionary(uniqueKeysWithValues: peers.map { ($0.id, $0.signingPublicKey.rawRepresentation) })
            let gateways = Set(peers.filter { ($0.capabilities ?? []).contains(.gateway) }.map(\.id))
            let rendezvous = Set(peers.filter { ($0.capabilities ?? []).contains(.bridge) }.map(\.id))
            updateIsland(gateways: gateways, rendezvous: rendezvous, now: now)
        case .pinRefused(let announced):
            recordPinRefusal(announced)
        case .publicMessage(let message):
            // A peer outside the live table that verified against its pin carries its Noise key with it.
            let noise = message.noisePublicKey ?? peerNoiseKeys[message.sender]
            let fingerprint = noise.map { Hex.encode(SHA256.hash($0)) }
            let identity = noise.flatMap { try? IdentityKey.mesh(noiseKey: $0) }
            perform(router.meshMessage(message, senderKey: fingerprint ?? message.sender.hex, identity: identity, now: now))
        case .carrier(let carrier):
            perform(router.meshCarrier(carrier, now: now))
        case .transmit:
            break
        case .syncRequest(let link, let input):
            guard let sync = stores.sync else { break }
            let answer = syncResponder.answer(input, gossip: sync, board: sync, now: Self.ms(now))
            if !answer.frames.isEmpty { submit(.sendSyncReplies(link: link, frames: answer.frames)) }
        case .syncRoundDue(let round):
            guard let sync = stores.sync else { break }
            submit(.sendSyncRequest(
                peer: round.peer, payload: SyncRequester.payload(types: round.types, gossip: sync, board: sync, now: Self.ms(now))))
        case .syncStore(let packet):
            guard let sync = stores.sync, let stored = try? SyncPacket(packet) else { break }
            if packet.type == .message {
                guard let text = String(validating: packet.payload, as: UTF8.self) else { break }
                let stableID = MeshMessageIdentity.stableID(senderHex: packet.sender.hex, timestampMs: packet.timestamp, content: text)
                guard let verdict = lastMeshVerdict, verdict.stableID == stableID, verdict.relay else { break }
            }
            if sync.record(stored, now: Self.ms(now)) == .stored, let kind = SyncStoreKind(type: packet.type) { syncStored.add(kind) }
        case .boardHeard:
            break  // the bridge runs with gossip sync: its board packets arrive as .boardPacket
        case .boardPacket(let packet, let link):
            guard let sync = stores.sync, let stored = try? SyncPacket(packet) else { break }
            // A verified post is judged like a message first (issue 17): a hidden one is neither kept nor relayed.
            if case .post(let post)? = try? BoardPayload.decode(packet.payload), post.isSignatureValid, !admitBoardPost(post, now: now) {
                syncBoardOutcomes.add(.hidden)
                break
            }
            let outcome = sync.ingest(stored, now: Self.ms(now))
            switch outcome {
            case .accepted(let deletedPost):
                syncBoardOutcomes.add(.accepted)
                submit(.relayBoard(packet, from: link))
                copyToNostr(stored, deletedPost: deletedPost, now: now)
            case .duplicate: syncBoardOutcomes.add(.duplicate)
            case .rejected(let reason): syncBoardOutcomes.add(.rejected(reason))
            }
        }
        rescheduleTick(now: now)
    }
}
