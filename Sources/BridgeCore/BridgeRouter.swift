public import BitchatWire
public import BotCrypto
import BotSupport
public import Geohash
public import Mesh
public import Nostr
public import SpamFilter
public import Identity

/// The bridge's policy as a pure state machine: inputs in, actions out, time and randomness passed in.
/// It carries public chat between a geohash channel on Nostr and a bitchat mesh in two roles:
///
/// - **Channel gateway** (carrier directions 1/2): channel events (kind 20000, first `g` = the channel)
///   are broadcast on the mesh as `fromGateway` carriers (≤ 30/min); directed, packet-signed `toGateway`
///   deposits are published.
/// - **Rendezvous bridge** (directions 3/4, geohash ≥ 6 chars): events of the 9-cell `#r` ring are broadcast
///   as `fromBridge` carriers (≤ 20/min); `toBridge` deposits are published; presence every 4 min.
///
/// Consent: only events signed by their authors cross, except the plain-text mirror (set per direction:
/// down — channel lines said by the author's ``Persona`` — on by default, up opt-in). Loops are prevented by ``LoopGuard``'s four rules. Judgement is
/// data: the router holds a pure ``BridgeJudge`` (block list + spam filter), asked after the structural and
/// signature checks and before the budgets, as PRODUCT §3 orders it; what it hides leaves as
/// ``Action/recordHidden(_:)`` for the shell to store. The router reads no clock (every input carries the
/// time; the verification budget's monotonic origin is injected) and does no I/O.
///
/// It decides *what* crosses; *when* a downlink goes on the air is the ``AirtimeMachine``'s (one budget, the island's
/// bridges): the router hands each downlink over as ``Action/downlink(_:)``, re-checks it when it is due
/// (``recheck(_:now:)``) and turns it into its broadcast (``downlinked(_:islandHas:)``).
///
/// This file holds the router's types, state, judgement and time (presence), and ``BridgeLimits``; the
/// relay side is in `BridgeRouter+Relay.swift`, the mesh side in `BridgeRouter+Mesh.swift`.
public struct BridgeRouter {
    /// Operator settings the router needs (from ``BridgeConfiguration``).
    public struct Settings: Sendable {
        /// The channel for the gateway role, nil when the role is off: its presence, its mirror and the
        /// uplink are this channel's.
        public var channel: GeohashCell?
        /// Every channel level downlinked (``ChannelLevels``): `channel` first; empty when the role is off.
        public var servedChannels: [GeohashCell]
        /// The 6-character cell for the rendezvous role, nil when the role is off.
        public var rendezvousCell: GeohashCell?
        public var mirrorDownlink: Bool
        public var mirrorUplink: Bool
        public var limits: BridgeLimits

        /// - Parameter servedChannels: the levels downlinked; nil = `channel` alone.
        public init(
            channel: GeohashCell?, rendezvousCell: GeohashCell?, mirrorDownlink: Bool = false,
            mirrorUplink: Bool = false, limits: BridgeLimits = BridgeLimits(), servedChannels: [GeohashCell]? = nil
        ) {
            self.channel = channel
            let served = channel.map { [$0] + (servedChannels ?? []).filter { $0 != channel } } ?? []
            self.servedChannels = served
            self.rendezvousCell = rendezvousCell
            self.mirrorDownlink = mirrorDownlink
            self.mirrorUplink = mirrorUplink
            self.limits = limits
        }
    }

    /// Which way a message would cross (the raw value is the `direction` metric label and log field).
    public enum Direction: String, Sendable, CaseIterable {
        case meshToNostr = "mesh-to-nostr"
        case nostrToMesh = "nostr-to-mesh"
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

    /// What the bridge puts on the mesh.
    public enum Downlink: Sendable, Equatable {
        case carrier(NostrCarrierPayload)
        /// Plain-text mirror: a public message from the author's persona (``PersonaBook``): `name` is the
        /// event's `n` tag, `author` its x-only public key.
        case text(String, author: [UInt8], name: String?)
    }

    /// What the caller must do, in order.
    public enum Action: Sendable, Equatable {
        /// Persist `id` (``RecentEventStore``) before performing the next action.
        case remember(EventID, RememberedRole)
        /// Send to the relays now.
        case publish(NostrEvent)
        /// A downlink that may cross, for the ``AirtimeMachine`` to put on the air when its turn comes.
        case downlink(AirtimeMachine.Offer)
        /// Broadcast on the mesh (TTL 7): a carrier packet-signed with the bridge's announced key, or our signed public message.
        case broadcast(Downlink, eventID: EventID)
        /// Mirror a public mesh message to the channel under a per-author key (the caller signs and mines).
        case mirrorUplink(MeshPublicMessage, senderKey: String)
        /// Tell the mesh engine whether it may relay the public message `stableID` on (its relay gate,
        /// ``MeshInput/relayVerdict(stableID:relay:)``): false for a message the judgement hid.
        case meshRelay(stableID: String, relay: Bool)
        /// The judge hid a message (or, in shadow mode, would have): log it and store its moderation record.
        case recordHidden(HiddenReport)
    }

    public let settings: Settings
    public private(set) var judge: BridgeJudge
    var loop: LoopGuard<EventID, XOnlyPublicKey>
    /// The served channel geohashes (``Settings/servedChannels``), for the relay-event scope check.
    let served: Set<String>
    var uplinks: UplinkQueue<MeshPeerID, NostrEvent>
    var depositLimiter: KeyedWindowLimiter<MeshPeerID>
    var inboundLimiter: SlidingWindowLimiter
    var signerLimiter: KeyedWindowLimiter<XOnlyPublicKey>
    var carrierVerifier: EventVerifier
    private let rendezvousKey: SchnorrSecretKey?
    /// Signs the channel presence (gateway role); nil sends none.
    private let channelKey: SchnorrSecretKey?
    /// Draws the channel-presence intervals (injected seed: deterministic in tests).
    private var presenceRandom: SeededRandom
    /// When the next channel presence is due (nil: send at the next chance).
    private var nextChannelPresence: Double?
    private var lastChannelPresence: Double?
    let ring: Set<String>
    var relaysUp = false
    private var lastPresence: Double?
    /// Forwarded, hidden and dropped, by direction and reason (for metrics and the summary line).
    public internal(set) var counters = BridgeCounters()
    /// Every verdict since the last ``takeJudgements()`` (the console's live view), oldest first; bounded by
    /// ``Limits/maxJournal`` (the oldest go) so a caller that never drains it holds a few hundred values at most.
    public private(set) var judgements: [Judgement] = []

    /// One verdict of the judge, as the live view shows it.
    public struct Judgement: Sendable, Equatable {
        public let candidate: Candidate
        public let verdict: Verdict
        /// The report of a hidden or would-hide message (rule, shadow, figures).
        public let report: HiddenReport?
    }

    public enum JournalLimits {
        /// Verdicts kept between two drains (the coordinator drains after every input).
        public static let maxJournal = 512
    }

    /// The verdicts since the last call, oldest first; empties the journal.
    public mutating func takeJudgements() -> [Judgement] {
        defer { judgements = [] }
        return judgements
    }
    /// The verification budget's monotonic time: `clockOrigin` stands for the first Unix time the router is
    /// given, later times are offsets from it (never backwards).
    private let clockOrigin: ContinuousClock.Instant
    private var unixBase: Double?

    /// - Parameters:
    ///   - ownKeys: every public key the bridge signs with (channel, rendezvous); events signed by them are
    ///     never carried (loop rule 4).
    ///   - rendezvousKey: signs the rendezvous presence.
    ///   - remembered: ids persisted by an earlier run (``RecentEventStore``), so a restart forwards nothing twice.
    ///   - channelKey: signs the channel presence (NOSTR-GEO §5.3) when the gateway role is on; nil sends none.
    ///   - presenceSeed: seeds the random channel-presence intervals.
    ///   - judge: the block list and spam filter (``BridgeJudge/passAll`` when judgement is not the point).
    ///   - clockOrigin: any monotonic instant; the carried-event verification budget measures from it.
    public init(
        settings: Settings, ownKeys: Set<XOnlyPublicKey>, rendezvousKey: SchnorrSecretKey?,
        remembered: RememberedEvents = RememberedEvents(),
        channelKey: SchnorrSecretKey? = nil, presenceSeed: UInt64 = 0, judge: BridgeJudge = .passAll,
        clockOrigin: ContinuousClock.Instant
    ) {
        self.settings = settings
        self.judge = judge
        self.clockOrigin = clockOrigin
        let limits = settings.limits
        loop = LoopGuard(ownKeys: ownKeys)
        for id in remembered.published { loop.recordPublished(id) }
        for id in remembered.rebroadcast { loop.recordRebroadcast(id) }
        for id in remembered.learned { loop.recordLearnedFromMesh(id) }
        for stableID in remembered.radioCopies { loop.recordRadioCopy(stableID: stableID) }
        served = Set(settings.servedChannels.map(\.string))
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

    /// The events this island already has from elsewhere (another bridge's carrier, the radio copy of a deposit),
    /// for the store at a graceful stop: a relay's replay to the restarted bridge is then not carried again.
    public var learnedEventIDs: [EventID] { loop.learned }
    /// The stable IDs of the public mesh messages the island heard, oldest first (kept across a graceful stop).
    public var radioCopies: [String] { loop.radioCopiesHeard }

    /// Replaces the block list (see ``BridgeJudge/setBlocked(_:)``).
    public mutating func setBlocked(_ keys: Set<IdentityKey>) { judge.setBlocked(keys) }

    public mutating func setStaff(_ keys: Set<IdentityKey>) { judge.setStaff(keys) }

    /// One key's block or staff mark (``BridgeJudge/mark(_:blocked:)``).
    public mutating func mark(_ key: IdentityKey, blocked: Bool) { judge.mark(key, blocked: blocked) }

    public mutating func mark(_ key: IdentityKey, staff: Bool) { judge.mark(key, staff: staff) }

    public mutating func setShadowMode(_ on: Bool) { judge.setShadowMode(on) }

    /// New spam limits (``BridgeJudge/setSpamConfig(_:)``).
    public mutating func setSpamConfig(_ config: SpamFilterConfig) { judge.setSpamConfig(config) }

    /// Replaces the denylist (the console's settings; see ``Denylist``).
    public mutating func setDenylist(_ list: Denylist) { judge.setDenylist(list) }

    public var queuedUplinks: Int { uplinks.count }
    public var carrierVerification: EventVerifier.Counters { carrierVerifier.counters }

    // MARK: Judgement

    mutating func judgeEvent(_ event: NostrEvent, direction: Direction, now: Double, into actions: inout [Action]) -> Bool {
        let candidate = Candidate(
            direction: direction, senderKey: event.pubkey.hex, identity: try? IdentityKey.nostr(pubkey: event.pubkey.bytes),
            messageID: event.id.hex,
            timestamp: Double(event.createdAt), text: event.content, displayName: EventRules.displayName(event))
        return admit(candidate, now: now, into: &actions)
    }

    /// A board post heard on the mesh (issue 17), judged like a mesh message with the post's author key as the
    /// sender key (block list when the author is a known mesh identity, spam filter): whether the bridge keeps
    /// and relays it, and the actions (a hidden post's ``Action/recordHidden(_:)``). Counted under mesh-to-nostr.
    public mutating func boardPost(_ candidate: Candidate, now: Double) -> (admit: Bool, actions: [Action]) {
        var actions: [Action] = []
        let admitted = admit(candidate, now: now, into: &actions)
        return (admitted, actions)
    }

    /// Asks the judge; appends the report of a hidden (or would-hide) message; true when it may cross.
    mutating func admit(_ candidate: Candidate, now: Double, into actions: inout [Action]) -> Bool {
        let (verdict, report) = judge.judge(candidate, now: now)
        if judgements.count >= JournalLimits.maxJournal { judgements.removeFirst(judgements.count - JournalLimits.maxJournal + 1) }
        judgements.append(Judgement(candidate: candidate, verdict: verdict, report: report))
        if let report { actions.append(.recordHidden(report)) }
        guard case .hide(let rule) = verdict else { return true }
        counters.hidden.add(.init(direction: candidate.direction, rule: rule))
        return false
    }

    // MARK: Time

    /// Periodic work: presence.
    public mutating func tick(now: Double) -> [Action] {
        presence(now: now, force: false) + channelPresence(now: now, force: false)
    }

    /// When ``tick(now:)`` has work next: a presence is due (only while a relay is up); `.infinity` when nothing is
    /// (an idle bridge with no relay sleeps).
    public func nextWake(now: Double) -> Double {
        guard relaysUp else { return .infinity }
        var next = Double.infinity
        if settings.rendezvousCell != nil, rendezvousKey != nil {
            next = min(next, lastPresence.map { $0 + settings.limits.presenceInterval } ?? now)
        }
        if settings.channel != nil, channelKey != nil { next = min(next, nextChannelPresence ?? now) }
        return next
    }

    // MARK: Downlinks due

    /// Whether a downlink the airtime machine has due still may cross (the loop rules, freshness), and whether the
    /// island has it from its radio copy, heard while it was held (rule 1 from now on, ``downlinked(_:islandHas:)``).
    public func recheck(_ offer: AirtimeMachine.Offer, now: Double) -> (wanted: Bool, islandHas: Bool) {
        let fresh = abs(Int64(now) - offer.createdAt) <= EventRules.Limits.maxEventAgeSeconds
        let id = offer.key.event
        if case .text = offer.downlink { return (fresh && !loop.wasLearnedFromMesh(id), false) }
        let heard = offer.radioStableID.map { loop.heardRadioCopy($0) } ?? false
        return (fresh && loop.mayRebroadcast(id, signer: offer.signer, radioStableID: offer.radioStableID), heard)
    }

    /// The downlinks the airtime machine put on the air, as broadcasts (a carrier remembered as rebroadcast first), and
    /// the events the island turned out to have (learned).
    public mutating func downlinked(_ sent: [AirtimeMachine.Offer], islandHas: [EventID]) -> [Action] {
        for id in islandHas { loop.recordLearnedFromMesh(id) }
        var actions: [Action] = []
        for offer in sent {
            let id = offer.key.event
            if case .carrier = offer.downlink {
                loop.recordRebroadcast(id)
                actions.append(.remember(id, .rebroadcast))
            }
            actions.append(.broadcast(offer.downlink, eventID: id))
        }
        return actions
    }

    /// Whether the island's radio copy of the public mesh message `stableID` was heard (loop rule 1).
    public func heardRadioCopy(_ stableID: String) -> Bool { loop.heardRadioCopy(stableID) }

    /// Rendezvous presence (kind 20001, `[["r", cell]]`, empty content) every 240 s while a relay is up,
    /// never more often than every 30 s.
    mutating func presence(now: Double, force: Bool) -> [Action] {
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
        counters.presenceSent.add(.rendezvous)
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
    mutating func channelPresence(now: Double, force: Bool) -> [Action] {
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
        counters.presenceSent.add(.channel)
        return [.publish(event)]
    }

    mutating func monotonic(_ unix: Double) -> ContinuousClock.Instant {
        if unixBase == nil { unixBase = unix }
        let offset = max(0, unix - (unixBase ?? unix))
        return clockOrigin + .milliseconds(Int64(offset * 1000))
    }
}

/// The bridge's budgets (PRODUCT §2, NOSTR-GEO §8.11): each named, each configurable, each with the
/// phones' value as default so phones never see more than they accept.
public struct BridgeLimits: Sendable, Equatable {
    /// Everything downlinked — every channel level, the ring, the mirror — shares one airtime budget and
    /// queue (``AirtimeSettings``: 30 a minute, the phones' `GatewayService` budget; queue 60, 10 per sender).
    public var airtime = AirtimeSettings()
    /// Each persona's mirror lines are paced at the ported spam filter's message bucket (SPAM-FILTER §2, the
    /// shipped default: 6, then 1 per 10 s — `../shared/seeds/spam-filter-pr.txt`), which Android phones that
    /// have it apply to every sender they see, rather than iOS's `MessageRateLimiter` (5, then 1 a second),
    /// which the carriers' lanes follow: a chatty author's seventh line within a minute would otherwise be
    /// hidden by those phones after costing airtime. (Its 1,200 characters a minute are not paced: the
    /// burst of 6 lines stays under them unless lines run past 200 characters.)
    public var mirrorPacing = AirtimePacing(
        burst: SpamFilterConfig().messageBucket.capacity,
        perSecond: SpamFilterConfig().messageBucket.refillTokens / SpamFilterConfig().messageBucket.refillSeconds)
    /// `fromBridge` broadcasts per minute within it (phones' `BridgeService`).
    public var bridgeDownlinksPerMinute = 20
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
    /// How long a downlink another bridge of the island was chosen to carry is kept, in case that bridge
    /// leaves (seconds): the longest hold (1.5 s) plus a few seconds of queueing behind the shared budget;
    /// longer would make a bridge that left long ago still hand its backlog over late.
    public var handoverWindow: Double = 10
    /// Rate-limiter key tables (depositors, signers); least recently created dropped beyond this.
    public var maxTrackedPeers = 4096

    public init() {}
}
