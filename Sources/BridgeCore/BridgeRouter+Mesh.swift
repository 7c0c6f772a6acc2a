public import BitchatWire
import BotCrypto
import BotSupport
import Geohash
public import Mesh
public import Nostr
import SpamFilter
public import Identity

/// The router's mesh side: public messages heard on the radio (judged, relay verdict, uplink mirror) and
/// carriers (other bridges' broadcasts learned, deposits checked and published or queued).
extension BridgeRouter {
    // MARK: Mesh side

    /// A public message heard on the radio (signature verified by the mesh engine), at `now` (Unix seconds).
    ///
    /// Every one is judged, also with the uplink mirror off: the verdict decides whether this bridge relays
    /// it further on the mesh (SPAM-FILTER §1), so ``Action/meshRelay(stableID:relay:)`` is always among the
    /// actions (after the ``Action/recordHidden(_:)`` of a hidden one). A hidden message is counted under
    /// mesh-to-nostr either way (it crosses nothing).
    public mutating func meshMessage(
        _ message: MeshPublicMessage, senderKey: String, identity: IdentityKey? = nil, now: Double
    ) -> [Action] {
        // Loop rule 3: the island has this radio copy; a bridged copy naming it is never rebroadcast.
        loop.recordRadioCopy(stableID: message.stableID)
        let candidate = Candidate(
            direction: .meshToNostr, senderKey: senderKey, identity: identity, messageID: message.stableID,
            timestamp: Double(message.timestamp) / 1000, text: message.text, displayName: message.nickname)
        var actions: [Action] = []
        guard admit(candidate, now: now, into: &actions) else {
            return actions + [.meshRelay(stableID: message.stableID, relay: false)]
        }
        actions.append(.meshRelay(stableID: message.stableID, relay: true))
        guard settings.mirrorUplink, settings.channel != nil else { return actions }
        counters.mirrored += 1
        return actions + [.mirrorUplink(message, senderKey: senderKey)]
    }

    /// A carrier from the mesh: a deposit directed to us (packet signature already verified against the
    /// depositor's announced key) or another bridge's broadcast.
    public mutating func meshCarrier(_ carrier: MeshCarrier, now: Double) -> [Action] {
        let payload = carrier.payload
        let unverified: UnverifiedEvent
        do {
            unverified = try UnverifiedEvent(json: String(decoding: payload.eventJSON, as: UTF8.self))
        } catch {
            counters.carrierDrops.add(.malformedEvent)
            return []
        }
        switch payload.direction {
        case .fromBridge, .fromGateway:
            // Loop rule 1: another bridge already put it on this island. Cheap: no signature needed to
            // *withhold* our own copy (a forged id only suppresses a downlink the island may get elsewhere).
            if let id = unverified.claimedID { loop.recordLearnedFromMesh(id) }
            counters.carriersLearned += 1
            return []
        case .toBridge:
            guard settings.rendezvousCell != nil else {
                counters.carrierDrops.add(.roleOff)
                return []
            }
            return deposit(unverified, carrier: carrier, now: now) { (event) throws(EventRules.Rejection) -> Bool in
                guard (try? GeohashCell(payload.geohash)) != nil else { throw .scopeMismatch }
                return try EventRules.classifyCarriedRendezvous(event, cell: payload.geohash, now: Int64(now)) == .message
            }
        case .toGateway:
            guard settings.channel != nil else {
                counters.carrierDrops.add(.roleOff)
                return []
            }
            return deposit(unverified, carrier: carrier, now: now) { (event) throws(EventRules.Rejection) -> Bool in
                guard (try? GeohashCell(payload.geohash)) != nil else { throw .scopeMismatch }
                try EventRules.checkChannelMessage(event, channel: payload.geohash, now: Int64(now))
                return true
            }
        }
    }

    /// The uplink checks of NOSTR-GEO §8.9 / §9: structure (`classify`, true = a chat message to judge),
    /// not seen or published, per-depositor rate, verification budget + Schnorr, judgement; then publish,
    /// or queue while no relay is connected.
    private mutating func deposit(
        _ unverified: UnverifiedEvent, carrier: MeshCarrier, now: Double,
        classify: (NostrEvent) throws(EventRules.Rejection) -> Bool
    ) -> [Action] {
        guard depositLimiter.admit(carrier.sender, now: now) else {
            counters.depositDrops.add(.depositorRate)
            return []
        }
        let event: NostrEvent
        do {
            event = try carrierVerifier.verify(unverified, now: monotonic(now))
        } catch {
            counters.depositDrops.add(.verification(.init(error)))
            return []
        }
        let isMessage: Bool
        do {
            isMessage = try classify(event)
        } catch {
            counters.depositDrops.add(.rule(error))
            return []
        }
        guard loop.mayPublish(event.id, signer: event.pubkey) else {
            counters.depositDrops.add(.loop)
            return []
        }
        var actions: [Action] = []
        if isMessage {
            guard judgeEvent(event, direction: .meshToNostr, now: now, into: &actions) else { return actions }
        }
        return actions + accept(event, from: carrier.sender)
    }

    /// An accepted deposit: published, or queued while no relay is connected.
    private mutating func accept(_ event: NostrEvent, from depositor: MeshPeerID) -> [Action] {
        counters.depositsAccepted += 1
        guard relaysUp else {
            counters.depositDrops.add(.queueFull, uplinks.enqueue(event, from: depositor).count)
            counters.depositsQueued += 1
            return []
        }
        return publishActions(event)
    }

    /// The operator releases a hidden deposit: it goes on as an accepted one would (published, or queued while no
    /// relay is connected) — the judge alone skipped, the loop rules and the ±900 s window kept.
    public mutating func releaseDeposit(_ event: NostrEvent, from depositor: MeshPeerID, now: Double) -> Result<[Action], ReleaseRefusal> {
        let age = Int64(now) - event.createdAt
        guard abs(age) <= EventRules.Limits.maxEventAgeSeconds else { return .failure(.rule(age > 0 ? .stale : .future, ageSeconds: age)) }
        guard loop.mayPublish(event.id, signer: event.pubkey) else { return .failure(.alreadyCarried) }
        counters.released += 1
        return .success(accept(event, from: depositor))
    }

    mutating func publishActions(_ event: NostrEvent) -> [Action] {
        loop.recordPublished(event.id)
        counters.published += 1
        return [.remember(event.id, .published), .publish(event)]
    }

    /// Records an event the caller signed and is about to publish (mirror uplink, presence).
    public mutating func recordOwnPublication(_ id: EventID) { loop.recordPublished(id) }
}
