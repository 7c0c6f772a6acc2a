public import BotSupport
public import Nostr
public import Moderation

/// What the router counts, as typed values (issue 15): every reason is a case, and its ``CounterKey/label``
/// is the metric label the catalogue (``BridgeMetrics``) renders. Nothing here is a metric name.
public struct BridgeCounters: Sendable, Equatable {
    /// A verified relay event the router did not carry, and why.
    public enum RelayDrop: CounterKey {
        /// Signed by one of the bridge's own keys (loop rule 4).
        case ownKey
        /// Already carried, published, or learned from the mesh (loop rules 1–3).
        case loop
        /// Neither the channel (`g`) nor the rendezvous ring (`r`).
        case unscoped
        /// Rendezvous events over the total per-minute bound.
        case inboundRate
        /// Rendezvous events over the per-signer per-minute bound.
        case signerRate
        /// A structural rule: stale or future (outside ±900 s), wrong kind, empty or oversized content, …
        case rule(EventRules.Rejection)

        public var label: String {
            switch self {
            case .ownKey: "own_key"
            case .loop: "loop"
            case .unscoped: "unscoped"
            case .inboundRate: "inbound_rate"
            case .signerRate: "signer_rate"
            case .rule(let rejection): rejection.rawValue
            }
        }
    }

    /// A mesh deposit (`toGateway` / `toBridge`) not published, and why.
    public enum DepositDrop: CounterKey {
        case depositorRate
        /// The verification budget, the id or the Schnorr signature.
        case verification(VerificationFailure)
        case rule(EventRules.Rejection)
        case loop
        /// Held while no relay was connected and pushed out by newer ones.
        case queueFull

        public var label: String {
            switch self {
            case .depositorRate: "depositor_rate"
            case .verification(let failure): failure.label
            case .rule(let rejection): rejection.rawValue
            case .loop: "loop"
            case .queueFull: "queue_full"
            }
        }
    }

    /// Why a carried event failed ``EventVerifier`` (the verifier's own counters, as a key).
    public enum VerificationFailure: String, CounterKey {
        case missingIDOrSignature = "missing_id_or_signature"
        case idMismatch = "id_mismatch"
        case overBudget = "over_budget"
        case invalidPublicKey = "invalid_public_key"
        case badSignature = "bad_signature"

        public init(_ error: NostrError) {
            switch error {
            case .idMismatch: self = .idMismatch
            case .overBudget: self = .overBudget
            case .invalidPublicKey: self = .invalidPublicKey
            case .badSignature: self = .badSignature
            default: self = .missingIDOrSignature
            }
        }
    }

    /// A mesh carrier the router could not use at all.
    public enum CarrierDrop: String, CounterKey {
        /// The carried JSON is not an event.
        case malformedEvent = "malformed_event"
        /// A deposit for a role this bridge does not serve.
        case roleOff = "role_off"
    }

    /// Which kind of downlink lane (``AirtimeScheduler``: channel levels, the ring, the mirror).
    public enum DownlinkQueue: String, CounterKey {
        case gateway
        case bridge
        case mirror
    }

    /// Which presence the router sent.
    public enum Presence: String, CounterKey {
        /// Rendezvous presence (`r`, every 240 s).
        case rendezvous
        /// Channel presence (`g`, every 40–80 s).
        case channel
    }

    /// Which scope an accepted relay event belonged to.
    public enum Scope: String, CounterKey {
        case channel
        case rendezvous
    }

    public var relayAccepted = Tally<Scope>()
    public var relayPresence = 0
    public var relayDrops = Tally<RelayDrop>()
    /// Hidden (or, in shadow mode, would-be-hidden does not count here) messages by direction and rule.
    public var hidden = Tally<HiddenKey>()
    /// Deposits accepted (published, or held while no relay is connected).
    public var depositsAccepted = 0
    /// Accepted deposits held because no relay was connected.
    public var depositsQueued = 0
    public var depositDrops = Tally<DepositDrop>()
    /// Uplinks published: accepted deposits (at once or flushed on reconnect).
    public var published = 0
    /// Public mesh messages mirrored to the channel (opt-in uplink mirror).
    public var mirrored = 0
    /// Hidden messages the operator released (console), which then took the normal path.
    public var released = 0
    /// Broadcast carriers of other bridges heard on the mesh (loop rule 1).
    public var carriersLearned = 0
    public var carrierDrops = Tally<CarrierDrop>()
    public var presenceSent = Tally<Presence>()

    public struct HiddenKey: CounterKey {
        public var direction: BridgeRouter.Direction
        public var rule: HideRule

        public init(direction: BridgeRouter.Direction, rule: HideRule) {
            self.direction = direction
            self.rule = rule
        }

        public var label: String { direction.rawValue + "/" + rule.label }
    }

    public init() {}

    /// Messages carried from the mesh to Nostr (the `bitchat_bridge_forwarded_total` series' `mesh-to-nostr`; the other
    /// way is the airtime machine's, ``AirtimeMachine/Counters/messages``).
    public var uplinked: Int { published + mirrored }

    public func hidden(_ direction: BridgeRouter.Direction) -> Int {
        hidden.counts.filter { $0.key.direction == direction }.values.reduce(0, +)
    }
}
