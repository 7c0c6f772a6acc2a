public import BitchatWire
public import BotCrypto
import BotSupport
public import Geohash
public import IdentityCache
public import Mesh
public import Nostr

/// The bridge's policy as a pure state machine: inputs in, actions out, time and randomness passed in.
/// It carries public chat between a geohash channel on Nostr and a bitchat mesh in two roles:
///
/// - **Channel gateway** (carrier directions 1/2): channel events (kind 20000, first `g` = the channel)
///   are broadcast on the mesh as `fromGateway` carriers (≤ 30/min); directed, packet-signed `toGateway`
///   deposits are published.
/// - **Rendezvous bridge** (directions 3/4, geohash ≥ 6 chars): events of the 9-cell `#r` ring are broadcast
///   as `fromBridge` carriers (≤ 20/min); `toBridge` deposits are published; presence every 4 min.
///
/// Consent: only events signed by their authors cross, except the opt-in plain-text mirror (off by
/// default, each direction separately). Loops are prevented by ``LoopGuard``'s four rules. Judgement
/// (block list, spam filter, moderation log) is the caller's `judge` closure, asked after the structural
/// and signature checks and before the budgets, as PRODUCT §3 orders it.
public struct BridgeRouter {
    /// Operator settings the router needs (from ``BridgeConfiguration``).
    public struct Settings: Sendable {
        /// The channel for the gateway role, nil when the role is off.
        public var channel: GeohashCell?
        /// The 6-character cell for the rendezvous role, nil when the role is off.
        public var rendezvousCell: GeohashCell?
        public var mirrorDownlink: Bool
        public var mirrorUplink: Bool
        public var limits: BridgeLimits

        public init(
            channel: GeohashCell?, rendezvousCell: GeohashCell?, mirrorDownlink: Bool = false,
            mirrorUplink: Bool = false, limits: BridgeLimits = BridgeLimits()
        ) {
            self.channel = channel
            self.rendezvousCell = rendezvousCell
            self.mirrorDownlink = mirrorDownlink
            self.mirrorUplink = mirrorUplink
            self.limits = limits
        }
    }

    /// Which way a message would cross.
    public enum Direction: String, Sendable {
        case meshToNostr = "mesh-to-nostr"
        case nostrToMesh = "nostr-to-mesh"

        /// The spelling used in counter and metric names.
        public var metricName: String {
            switch self {
            case .meshToNostr: "mesh_to_nostr"
            case .nostrToMesh: "nostr_to_mesh"
            }
        }
    }

    /// What the judge sees: a neutral description of a message about to cross (SPAM-FILTER §1 sender keys).
    public struct Candidate: Sendable, Equatable {
        public let direction: Direction
        /// Nostr: the lowercase hex pubkey; mesh: the Noise fingerprint (or peer ID hex when unknown).
        public let senderKey: String
        /// The sender's identity-cache key, when known (for the block list).
        public let identity: IdentityKey?
        /// Nostr event id hex, or the mesh stable ID.
        public let messageID: String
        /// Seconds since the Unix epoch as the message claims it.
        public let timestamp: Double
        public let text: String
        /// How phones show the sender (`nick#last4` for Nostr, the announced nickname for mesh).
        public var displayName: String? = nil

        public init(
            direction: Direction, senderKey: String, identity: IdentityKey?, messageID: String, timestamp: Double,
            text: String, displayName: String? = nil
        ) {
            self.direction = direction
            self.senderKey = senderKey
            self.identity = identity
            self.messageID = messageID
            self.timestamp = timestamp
            self.text = text
            self.displayName = displayName
        }
    }

    /// The judge's answer.
    public enum Verdict: Sendable, Equatable {
        case pass
        case hide(rule: String)
    }

    /// What the bridge puts on the mesh.
    public enum Downlink: Sendable, Equatable {
        case carrier(NostrCarrierPayload)
        /// Plain-text mirror: the bridge's own signed public message.
        case text(String)
    }

    /// What the caller must do, in order.
    public enum Action: Sendable, Equatable {
        /// Persist `id` (``RecentEventStore``) before performing the next action.
        case remember(EventID, RecentEventStore.Role)
        /// Send to the relays now.
        case publish(NostrEvent)
        /// Broadcast on the mesh (TTL 7, unsigned carrier or our signed public message).
        case broadcast(Downlink, eventID: EventID)
        /// Mirror a public mesh message to the channel under a per-author key (the caller signs and mines).
        case mirrorUplink(MeshPublicMessage, senderKey: String)
        /// Tell the mesh engine whether it may relay the public message `stableID` on (its relay gate,
        /// ``MeshInput/relayVerdict(stableID:relay:)``): false for a message the judgement hid.
        case meshRelay(stableID: String, relay: Bool)
    }

    public let settings: Settings
    private var loop: LoopGuard<EventID, XOnlyPublicKey>
    private var gatewayDownlinks: DownlinkScheduler<EventID, PendingDownlink>
    private var bridgeDownlinks: DownlinkScheduler<EventID, PendingDownlink>
    private var mirrorDownlinks: DownlinkScheduler<EventID, PendingDownlink>
    private var uplinks: UplinkQueue<MeshPeerID, NostrEvent>
    private var depositLimiter: KeyedWindowLimiter<MeshPeerID>
    private var inboundLimiter: SlidingWindowLimiter
    private var signerLimiter: KeyedWindowLimiter<XOnlyPublicKey>
    private var carrierVerifier: EventVerifier
    private let rendezvousKey: SchnorrSecretKey?
    /// Signs the channel presence (gateway role); nil sends none.
    private let channelKey: SchnorrSecretKey?
    /// Draws the channel-presence intervals (injected seed: deterministic in tests).
    private var presenceRandom: SeededRandom
    /// When the next channel presence is due (nil: send at the next chance).
    private var nextChannelPresence: Double?
    private var lastChannelPresence: Double?
    private let ring: Set<String>
    private var relaysUp = false
    /// Verified bridge/gateway peers in direct radio range whose peer ID sorts before ours.
    private var bridgesAhead = 0
    private var lastPresence: Double?
    /// Named counters: forwarded and dropped, by direction and reason (for metrics and the summary line).
    public private(set) var counters: [String: Int] = [:]
    private let monotonicBase = ContinuousClock.now
    private var unixBase: Double?

    struct PendingDownlink: Sendable {
        let downlink: Downlink
        let signer: XOnlyPublicKey
        let createdAt: Int64
        let radioStableID: String?
    }

    /// - Parameters:
    ///   - ownKeys: every public key the bridge signs with (channel, rendezvous); events signed by them are
    ///     never carried (loop rule 4).
    ///   - rendezvousKey: signs the rendezvous presence.
    ///   - remembered: ids persisted by an earlier run (``RecentEventStore``), so a restart forwards nothing twice.
    ///   - channelKey: signs the channel presence (NOSTR-GEO §5.3) when the gateway role is on; nil sends none.
    ///   - presenceSeed: seeds the random channel-presence intervals.
    public init(
        settings: Settings, ownKeys: Set<XOnlyPublicKey>, rendezvousKey: SchnorrSecretKey?,
        remembered: (published: [EventID], rebroadcast: [EventID]) = ([], []),
        channelKey: SchnorrSecretKey? = nil, presenceSeed: UInt64 = 0
    ) {
        self.settings = settings
        let limits = settings.limits
        loop = LoopGuard(ownKeys: ownKeys)
        for id in remembered.published { loop.recordPublished(id) }
        for id in remembered.rebroadcast { loop.recordRebroadcast(id) }
        gatewayDownlinks = DownlinkScheduler(perMinute: limits.gatewayDownlinksPerMinute, maxPending: limits.maxPendingDownlinks)
        bridgeDownlinks = DownlinkScheduler(perMinute: limits.bridgeDownlinksPerMinute, maxPending: limits.maxPendingDownlinks)
        mirrorDownlinks = DownlinkScheduler(perMinute: limits.gatewayDownlinksPerMinute, maxPending: limits.maxPendingDownlinks)
        uplinks = UplinkQueue(maxTotal: limits.maxQueuedUplinks, maxPerDepositor: limits.maxQueuedUplinksPerDepositor)
        depositLimiter = KeyedWindowLimiter(limit: limits.depositsPerMinutePerDepositor, maxKeys: limits.maxTrackedPeers)
        inboundLimiter = SlidingWindowLimiter(limit: limits.inboundEventsPerMinute)
        signerLimiter = KeyedWindowLimiter(limit: limits.inboundEventsPerMinutePerSigner, maxKeys: limits.maxTrackedPeers)
        carrierVerifier = EventVerifier(
            configuration: .init(burst: Double(limits.verificationsPerMinute), perSecond: Double(limits.verificationsPerMinute) / 60))
        self.rendezvousKey = rendezvousKey
        self.channelKey = settings.channel == nil ? nil : channelKey
        presenceRandom = SeededRandom(seed: presenceSeed)
        ring = Set(settings.rendezvousCell?.ring.map(\.string) ?? [])
    }

    private mutating func count(_ name: String) { counters[name, default: 0] += 1 }

    /// Queue depths for metrics.
    public var pendingDownlinks: Int { gatewayDownlinks.pendingCount + bridgeDownlinks.pendingCount + mirrorDownlinks.pendingCount }
    public var queuedUplinks: Int { uplinks.count }
    public var carrierVerification: EventVerifier.Counters { carrierVerifier.counters }

    // MARK: Relay side

    /// An event from the relay subscriptions (already verified by the pool: structure, budget, signature).
    public mutating func relayEvent(
        _ event: NostrEvent, now: Double, random unit: Double, judge: (Candidate) -> Verdict
    ) -> [Action] {
        if loop.isOwnKey(event.pubkey) {
            count("relay.drop.own_key")
            return []
        }
        let nowSeconds = Int64(now)
        if let channel = settings.channel, let g = event.firstTag("g"), g.count >= 2, g[1] == channel.string {
            do {
                try EventRules.checkChannelMessage(event, channel: channel.string, now: nowSeconds)
            } catch {
                count("relay.drop.\(error.rawValue)")
                return []
            }
            guard loop.mayRebroadcast(event.id, signer: event.pubkey, radioStableID: nil) else {
                count("relay.drop.loop")
                return []
            }
            guard judgeEvent(event, direction: .nostrToMesh, judge: judge) else { return [] }
            let payload = NostrCarrierPayload(direction: .fromGateway, geohash: channel.string, eventJSON: event.jsonBytes)
            let pending = PendingDownlink(downlink: .carrier(payload), signer: event.pubkey, createdAt: event.createdAt, radioStableID: nil)
            if gatewayDownlinks.enqueue(id: event.id, item: pending, now: now, unitRandom: unit, extraHold: yieldHold) != nil {
                count("downlink.drop.queue_full")
            }
            if settings.mirrorDownlink {
                let text = PendingDownlink(
                    downlink: .text(EventRules.displayName(event) + ": " + event.content), signer: event.pubkey,
                    createdAt: event.createdAt, radioStableID: nil)
                if mirrorDownlinks.enqueue(id: event.id, item: text, now: now, unitRandom: unit, extraHold: yieldHold) != nil {
                    count("downlink.drop.queue_full")
                }
            }
            count("relay.accepted.channel")
            return []
        }
        guard !ring.isEmpty, event.firstTag("r") != nil else {
            count("relay.drop.unscoped")
            return []
        }
        let classified: (cell: String, kind: EventRules.RendezvousKind)
        do {
            classified = try EventRules.classifyRendezvous(event, ring: ring, now: nowSeconds)
        } catch {
            count("relay.drop.\(error.rawValue)")
            return []
        }
        guard inboundLimiter.admit(now: now) else {
            count("relay.drop.inbound_rate")
            return []
        }
        guard signerLimiter.admit(event.pubkey, now: now) else {
            count("relay.drop.signer_rate")
            return []
        }
        guard classified.kind == .message else {
            count("relay.presence")
            return []
        }
        let stableID = EventRules.radioHint(event).map {
            MeshMessageIdentity.stableID(senderHex: $0.senderHex, timestampMs: $0.timestampMs, content: event.content)
        }
        guard loop.mayRebroadcast(event.id, signer: event.pubkey, radioStableID: stableID) else {
            count("relay.drop.loop")
            return []
        }
        guard judgeEvent(event, direction: .nostrToMesh, judge: judge) else { return [] }
        let payload = NostrCarrierPayload(direction: .fromBridge, geohash: classified.cell, eventJSON: event.jsonBytes)
        let pending = PendingDownlink(downlink: .carrier(payload), signer: event.pubkey, createdAt: event.createdAt, radioStableID: stableID)
        if bridgeDownlinks.enqueue(id: event.id, item: pending, now: now, unitRandom: unit, extraHold: yieldHold) != nil {
            count("downlink.drop.queue_full")
        }
        count("relay.accepted.rendezvous")
        return []
    }

    /// How many bridge or gateway peers in direct range sort before this bridge (by peer ID). Several
    /// bridges on one island all hear the same relay event; phones separate their copies with a random
    /// 0.2–1.5 s hold alone, which still collides when two holds end within the radio's latency. Bridges
    /// therefore also yield in peer-ID order: each bridge ahead adds ``BridgeLimits/yieldPerBridgeAhead``, so
    /// the first bridge's broadcast is normally heard (loop rule 1) before the next one's hold ends, and
    /// a bridge that fails to send is still covered by the next.
    public mutating func setBridgesAhead(_ count: Int) { bridgesAhead = max(0, count) }

    private var yieldHold: Double { Double(bridgesAhead) * settings.limits.yieldPerBridgeAhead }

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

    // MARK: Mesh side

    /// A public message heard on the radio (signature verified by the mesh engine).
    ///
    /// Every one is judged, also with the uplink mirror off: the verdict decides whether this bridge relays
    /// it further on the mesh (SPAM-FILTER §1), so the first action is always ``Action/meshRelay(stableID:relay:)``.
    /// A hidden message is counted `mesh_to_nostr.hidden.<rule>` either way (it crosses nothing).
    public mutating func meshMessage(
        _ message: MeshPublicMessage, senderKey: String, identity: IdentityKey? = nil, judge: (Candidate) -> Verdict
    ) -> [Action] {
        // Loop rule 3: the island has this radio copy; a bridged copy naming it is never rebroadcast.
        loop.recordRadioCopy(stableID: message.stableID)
        let candidate = Candidate(
            direction: .meshToNostr, senderKey: senderKey, identity: identity, messageID: message.stableID,
            timestamp: Double(message.timestamp) / 1000, text: message.text, displayName: message.nickname)
        if case .hide(let rule) = judge(candidate) {
            count("mesh_to_nostr.hidden.\(rule)")
            return [.meshRelay(stableID: message.stableID, relay: false)]
        }
        let relay = Action.meshRelay(stableID: message.stableID, relay: true)
        guard settings.mirrorUplink, settings.channel != nil else { return [relay] }
        count("mesh_to_nostr.mirrored")
        return [relay, .mirrorUplink(message, senderKey: senderKey)]
    }

    /// A carrier from the mesh: a deposit directed to us (packet signature already verified against the
    /// depositor's announced key) or another bridge's broadcast.
    public mutating func meshCarrier(_ carrier: MeshCarrier, now: Double, judge: (Candidate) -> Verdict) -> [Action] {
        let payload = carrier.payload
        let unverified: UnverifiedEvent
        do {
            unverified = try UnverifiedEvent(json: String(decoding: payload.eventJSON, as: UTF8.self))
        } catch {
            count("carrier.drop.\(error.name)")
            return []
        }
        switch payload.direction {
        case .fromBridge, .fromGateway:
            // Loop rule 1: another bridge already put it on this island. Cheap: no signature needed to
            // *withhold* our own copy (a forged id only suppresses a downlink the island may get elsewhere).
            if let id = unverified.claimedID { loop.recordLearnedFromMesh(id) }
            count("carrier.learned_from_mesh")
            return []
        case .toBridge:
            guard let cell = settings.rendezvousCell else {
                count("carrier.drop.role_off")
                return []
            }
            _ = cell
            return deposit(unverified, carrier: carrier, now: now, judge: judge) { event in
                guard (try? GeohashCell(payload.geohash)) != nil else { throw EventRules.Rejection.scopeMismatch }
                return try EventRules.classifyCarriedRendezvous(event, cell: payload.geohash, now: Int64(now)) == .message
            }
        case .toGateway:
            guard settings.channel != nil else {
                count("carrier.drop.role_off")
                return []
            }
            return deposit(unverified, carrier: carrier, now: now, judge: judge) { event in
                guard (try? GeohashCell(payload.geohash)) != nil else { throw EventRules.Rejection.scopeMismatch }
                try EventRules.checkChannelMessage(event, channel: payload.geohash, now: Int64(now))
                return true
            }
        }
    }

    /// The uplink checks of NOSTR-GEO §8.9 / §9: structure (`classify`, true = a chat message to judge),
    /// not seen or published, per-depositor rate, verification budget + Schnorr, judgement; then publish,
    /// or queue while no relay is connected.
    private mutating func deposit(
        _ unverified: UnverifiedEvent, carrier: MeshCarrier, now: Double, judge: (Candidate) -> Verdict,
        classify: (NostrEvent) throws -> Bool
    ) -> [Action] {
        guard depositLimiter.admit(carrier.sender, now: now) else {
            count("deposit.drop.depositor_rate")
            return []
        }
        let event: NostrEvent
        do {
            event = try carrierVerifier.verify(unverified, now: monotonic(now))
        } catch {
            count("deposit.drop.\(error.name)")
            return []
        }
        let isMessage: Bool
        do {
            isMessage = try classify(event)
        } catch let rejection as EventRules.Rejection {
            count("deposit.drop.\(rejection.rawValue)")
            return []
        } catch {
            count("deposit.drop.scope_mismatch")
            return []
        }
        guard loop.mayPublish(event.id, signer: event.pubkey) else {
            count("deposit.drop.loop")
            return []
        }
        if isMessage {
            guard judgeEvent(event, direction: .meshToNostr, judge: judge) else { return [] }
        }
        count("deposit.accepted")
        guard relaysUp else {
            if !uplinks.enqueue(event, from: carrier.sender).isEmpty { count("deposit.drop.queue_full") }
            count("deposit.queued")
            return []
        }
        return publishActions(event)
    }

    private mutating func publishActions(_ event: NostrEvent) -> [Action] {
        loop.recordPublished(event.id)
        count("mesh_to_nostr.published")
        return [.remember(event.id, .published), .publish(event)]
    }

    /// Records an event the caller signed and is about to publish (mirror uplink, presence).
    public mutating func recordOwnPublication(_ id: EventID) { loop.recordPublished(id) }

    private mutating func judgeEvent(_ event: NostrEvent, direction: Direction, judge: (Candidate) -> Verdict) -> Bool {
        let candidate = Candidate(
            direction: direction, senderKey: event.pubkey.hex, identity: try? IdentityKey.nostr(pubkey: event.pubkey.bytes),
            messageID: event.id.hex,
            timestamp: Double(event.createdAt), text: event.content, displayName: EventRules.displayName(event))
        if case .hide(let rule) = judge(candidate) {
            count("\(direction.metricName).hidden.\(rule)")
            return false
        }
        return true
    }

    // MARK: Time

    /// Periodic work: due downlinks (re-checked against the loop rules and freshness), presence.
    public mutating func tick(now: Double) -> [Action] {
        var actions: [Action] = []
        for scheduler in [\BridgeRouter.gatewayDownlinks, \.bridgeDownlinks, \.mirrorDownlinks] {
            let loop = self.loop
            var pendingQueue = self[keyPath: scheduler]
            let due = pendingQueue.due(now: now) { id, pending in
                let fresh = abs(Int64(now) - pending.createdAt) <= EventRules.Limits.maxEventAgeSeconds
                if case .text = pending.downlink { return fresh && !loop.wasLearnedFromMesh(id) }
                return fresh && loop.mayRebroadcast(id, signer: pending.signer, radioStableID: pending.radioStableID)
            }
            self[keyPath: scheduler] = pendingQueue
            for (id, pending) in due {
                if case .carrier = pending.downlink {
                    self.loop.recordRebroadcast(id)
                    actions.append(.remember(id, .rebroadcast))
                }
                actions.append(.broadcast(pending.downlink, eventID: id))
                count("nostr_to_mesh.broadcast")
            }
        }
        actions += presence(now: now, force: false)
        actions += channelPresence(now: now, force: false)
        return actions
    }

    /// When ``tick(now:)`` has work next (a hold ends or the budget frees up), at the latest one presence interval.
    public func nextWake(now: Double) -> Double {
        let candidates = [gatewayDownlinks.nextWake(now: now), bridgeDownlinks.nextWake(now: now), mirrorDownlinks.nextWake(now: now)]
        return min(candidates.compactMap { $0 }.min() ?? now + 1, now + 1)
    }

    /// Rendezvous presence (kind 20001, `[["r", cell]]`, empty content) every 240 s while a relay is up,
    /// never more often than every 30 s.
    private mutating func presence(now: Double, force: Bool) -> [Action] {
        guard relaysUp, let cell = settings.rendezvousCell, let key = rendezvousKey else { return [] }
        if let last = lastPresence {
            let interval = force ? settings.limits.minimumPresenceSpacing : settings.limits.presenceInterval
            guard now - last >= interval else { return [] }
        }
        guard
            let event = try? UnsignedEvent(
                pubkey: key.publicKey, createdAt: Int64(now), kind: NostrKind.presence, tags: [["r", cell.string]], content: ""
            ).signed(with: key)
        else { return [] }
        lastPresence = now
        count("presence.sent")
        return [.publish(event)]
    }

    /// Channel presence (NOSTR-GEO §5.3; gateway role): kind 20001, empty content, tags exactly
    /// `[["g", channel]]`, no `n` tag, signed with the channel key, so phones count the bridge among the
    /// channel's people (they count a key for 5 min after its last 20000/20001 event).
    ///
    /// Cadence, decided: the phones' own — a fresh uniformly random interval in
    /// ``BridgeLimits/channelPresenceMinimum``…``BridgeLimits/channelPresenceMaximum`` (40–80 s) after each
    /// presence, always inside the 5-minute counting window, and randomised so bridges and phones do not
    /// beat in step. One is sent as soon as a relay connects (not closer than
    /// ``BridgeLimits/minimumPresenceSpacing`` to the last one, so a flapping relay cannot make a burst);
    /// none while no relay is connected. Phones send presence only for 2-, 4- and 5-character channels;
    /// the bridge sends it for whatever channel it serves, since it is present there.
    private mutating func channelPresence(now: Double, force: Bool) -> [Action] {
        guard relaysUp, let channel = settings.channel, let key = channelKey else { return [] }
        if force {
            if let last = lastChannelPresence, now - last < settings.limits.minimumPresenceSpacing { return [] }
        } else if let next = nextChannelPresence, now < next {
            return []
        }
        guard
            let event = try? UnsignedEvent(
                pubkey: key.publicKey, createdAt: Int64(now), kind: NostrKind.presence, tags: [["g", channel.string]], content: ""
            ).signed(with: key)
        else { return [] }
        lastChannelPresence = now
        let limits = settings.limits
        let span = max(0, limits.channelPresenceMaximum - limits.channelPresenceMinimum)
        let unit = Double(presenceRandom.next() >> 11) / Double(1 << 53)
        nextChannelPresence = now + limits.channelPresenceMinimum + span * unit
        count("presence.channel.sent")
        return [.publish(event)]
    }

    private mutating func monotonic(_ unix: Double) -> ContinuousClock.Instant {
        if unixBase == nil { unixBase = unix }
        let offset = max(0, unix - (unixBase ?? unix))
        return monotonicBase + .milliseconds(Int64(offset * 1000))
    }
}

/// The bridge's budgets (PRODUCT §2, NOSTR-GEO §8.11): each named, each configurable, each with the
/// phones' value as default so phones never see more than they accept.
public struct BridgeLimits: Sendable, Equatable {
    /// `fromGateway` broadcasts per minute (phones' `GatewayService`).
    public var gatewayDownlinksPerMinute = 30
    /// `fromBridge` broadcasts per minute (phones' `BridgeService`).
    public var bridgeDownlinksPerMinute = 20
    /// Downlinks waiting for their hold or budget; the oldest is dropped beyond this.
    public var maxPendingDownlinks = 30
    /// Deposits accepted per depositor per minute.
    public var depositsPerMinutePerDepositor = 10
    /// Deposits queued while no relay is connected, in total and per depositor.
    public var maxQueuedUplinks = 20
    public var maxQueuedUplinksPerDepositor = 5
    /// Rendezvous events accepted per minute in total and per signer (phones' inbound limits).
    public var inboundEventsPerMinute = 600
    public var inboundEventsPerMinutePerSigner = 120
    /// Schnorr verifications of carried events per minute (phones: 720).
    public var verificationsPerMinute = 720
    /// Presence cadence and the minimum spacing between two presences (seconds).
    public var presenceInterval: Double = 240
    public var minimumPresenceSpacing: Double = 30
    /// Channel presence (gateway role) every uniformly random 40–80 s, as phones do (NOSTR-GEO §5.3).
    public var channelPresenceMinimum: Double = 40
    public var channelPresenceMaximum: Double = 80
    /// Extra hold per peer bridge in direct range that sorts before this one (seconds): longer than the
    /// whole random hold range, so the earlier bridge's broadcast arrives first even under load.
    public var yieldPerBridgeAhead: Double = 2
    /// Rate-limiter key tables (depositors, signers); least recently created dropped beyond this.
    public var maxTrackedPeers = 4096

    public init() {}
}
