import BitchatWire
import BotCrypto
import BotSupport
import Geohash
import Mesh
public import Nostr
import SpamFilter

/// The router's relay side: channel and rendezvous events from the relays turned into downlinks, the
/// operator's release of a hidden channel message, and relay connectivity (queued deposits flushed on
/// connect, drained at stop).
extension BridgeRouter {
    // MARK: Relay side

    /// An event from the relay subscriptions (already verified by the pool: structure, budget, signature).
    /// `protected`: the author is on the operator's allow or verify list, so its downlinks are scheduled
    /// as an established sender's (``AirtimeScheduler``).
    public mutating func relayEvent(_ event: NostrEvent, now: Double, random unit: Double, protected: Bool = false) -> [Action] {
        if loop.isOwnKey(event.pubkey) {
            counters.relayDrops.add(.ownKey)
            return []
        }
        let nowSeconds = Int64(now)
        if let g = event.firstTag("g"), g.count >= 2, served.contains(g[1]) {
            let level = g[1]
            do {
                try EventRules.checkChannelMessage(event, channel: level, now: nowSeconds)
            } catch {
                counters.relayDrops.add(.rule(error))
                return []
            }
            guard loop.mayRebroadcast(event.id, signer: event.pubkey, radioStableID: nil) else {
                counters.relayDrops.add(.loop)
                return []
            }
            var actions: [Action] = []
            guard judgeEvent(event, direction: .nostrToMesh, now: now, into: &actions) else { return actions }
            return actions + channelDownlinks(event, level: level, unit: unit, protected: protected)
        }
        guard !ring.isEmpty, event.firstTag("r") != nil else {
            counters.relayDrops.add(.unscoped)
            return []
        }
        let classified: (cell: String, kind: EventRules.RendezvousKind)
        do {
            classified = try EventRules.classifyRendezvous(event, ring: ring, now: nowSeconds)
        } catch {
            counters.relayDrops.add(.rule(error))
            return []
        }
        guard inboundLimiter.admit(now: now) else {
            counters.relayDrops.add(.inboundRate)
            return []
        }
        guard signerLimiter.admit(event.pubkey, now: now) else {
            counters.relayDrops.add(.signerRate)
            return []
        }
        guard classified.kind == .message else {
            counters.relayPresence += 1
            return []
        }
        let stableID = EventRules.radioHint(event).map {
            MeshMessageIdentity.stableID(senderHex: $0.senderHex, timestampMs: $0.timestampMs, content: event.content)
        }
        guard loop.mayRebroadcast(event.id, signer: event.pubkey, radioStableID: stableID) else {
            // The island has the radio copy: the event is learned (rule 1 from now on, also after a restart).
            if let stableID, loop.heardRadioCopy(stableID) { loop.recordLearnedFromMesh(event.id) }
            counters.relayDrops.add(.loop)
            return []
        }
        var actions: [Action] = []
        guard judgeEvent(event, direction: .nostrToMesh, now: now, into: &actions) else { return actions }
        let payload = NostrCarrierPayload(direction: .fromBridge, geohash: classified.cell, eventJSON: event.jsonBytes)
        counters.relayAccepted.add(.rendezvous)
        return actions + [.downlink(offer(
            .carrier(payload), of: event, lane: .bridge, airtime: payload.eventJSON.count, unit: unit, protected: protected,
            radioStableID: stableID, laneLimit: settings.limits.bridgeDownlinksPerMinute))]
    }

    /// A channel message past every check: a downlink on its own level (a carrier), and the text mirror's line when on.
    private mutating func channelDownlinks(_ event: NostrEvent, level: String, unit: Double, protected: Bool) -> [Action] {
        let payload = NostrCarrierPayload(direction: .fromGateway, geohash: level, eventJSON: event.jsonBytes)
        var actions: [Action] = [.downlink(offer(
            .carrier(payload), of: event, lane: .gateway(level), airtime: payload.eventJSON.count, unit: unit, protected: protected))]
        // The mirror speaks the configured channel only: its lines go into the mesh's one public timeline,
        // where lines of every level would be mixed.
        if settings.mirrorDownlink, level == settings.channel?.string {
            actions.append(.downlink(offer(
                .text(event.content, author: event.pubkey.bytes, name: EventRules.nickname(event)), of: event, lane: .mirror,
                airtime: event.content.utf8.count, unit: unit, protected: protected)))
        }
        counters.relayAccepted.add(.channel)
        return actions
    }

    private func offer(
        _ downlink: Downlink, of event: NostrEvent, lane: AirtimeMachine.Lane, airtime: Int, unit: Double, protected: Bool,
        radioStableID: String? = nil, laneLimit: Int? = nil
    ) -> AirtimeMachine.Offer {
        var text = false
        if case .text = downlink { text = true }
        return AirtimeMachine.Offer(
            key: .init(event: event.id, text: text), lane: lane, downlink: downlink, signer: event.pubkey, createdAt: event.createdAt,
            radioStableID: radioStableID, airtime: airtime, protected: protected, laneLimit: laneLimit, unit: unit)
    }

    /// Why a hidden message cannot be released.
    public enum ReleaseRefusal: Error, Equatable, Sendable, CustomStringConvertible {
        /// Outside the ±900 s freshness window phones accept (NOSTR-GEO; `EventRules.checkFreshness`), or another rule.
        case rule(EventRules.Rejection, ageSeconds: Int64)
        /// Already carried (or published, or learned from the mesh): the loop rules never carry it twice.
        case alreadyCarried
        /// Not a message of the channel this bridge serves (the rendezvous path has no release).
        case notChannel

        public var description: String {
            switch self {
            case .rule(let rejection, let age):
                rejection == .stale || rejection == .future
                    ? "outside the ±900 s freshness window (created \(age) s \(age >= 0 ? "ago" : "ahead")): phones would drop it"
                    : "it no longer passes the channel rules (\(rejection.rawValue))"
            case .alreadyCarried: "already carried: the loop rules never carry a message twice"
            case .notChannel: "not a message of this bridge's channel"
            }
        }
    }

    /// The operator releases a message the judge hid: it goes through the normal path — the channel rules (the
    /// ±900 s window included), the loop rules, the downlink budget and hold — with the judge alone skipped. Its
    /// downlinks are returned.
    public mutating func release(_ event: NostrEvent, now: Double, random unit: Double) -> Result<[Action], ReleaseRefusal> {
        guard let channel = settings.channel, let g = event.firstTag("g"), g.count >= 2, g[1] == channel.string else {
            return .failure(.notChannel)
        }
        do {
            try EventRules.checkChannelMessage(event, channel: channel.string, now: Int64(now))
        } catch {
            return .failure(.rule(error, ageSeconds: Int64(now) - event.createdAt))
        }
        guard loop.mayRebroadcast(event.id, signer: event.pubkey, radioStableID: nil) else { return .failure(.alreadyCarried) }
        counters.released += 1
        return .success(channelDownlinks(event, level: channel.string, unit: unit, protected: false))
    }

    /// Relay connectivity changed. Coming up flushes queued deposits and (rendezvous role) sends presence.
    public mutating func relaysConnected(_ up: Bool, now: Double) -> [Action] {
        let wasUp = relaysUp
        relaysUp = up
        guard up, !wasUp else { return [] }
        var actions: [Action] = []
        for event in uplinks.drain() where loop.mayPublish(event.id, signer: event.pubkey) {
            actions += publishActions(event)
        }
        actions += presence(now: now, force: true)
        actions += channelPresence(now: now, force: true)
        return actions
    }

    /// Graceful stop: the deposits held while no relay is connected, oldest first (the queue is empty
    /// afterwards), for the caller to write to the ``UplinkStore``; each is recorded as published, as a
    /// flush on reconnect would.
    public mutating func drainQueuedUplinks() -> [NostrEvent] {
        var drained: [NostrEvent] = []
        for event in uplinks.drain() where loop.mayPublish(event.id, signer: event.pubkey) {
            loop.recordPublished(event.id)
            drained.append(event)
        }
        return drained
    }
}
