public import BitchatWire
public import BotSupport

// Every family is a `Tally` of a `CounterKey` (BotSupport): typed keys whose labels are the metric label
// values (snake case). Metric names are not made here: the bridge's metrics catalogue maps each family (a
// stored property of ``MeshCounters``) to its metric and each key to its labels.

/// Frames dropped at the engine's ingress gate (MESH-WIRE §7.4), before any payload is looked at.
public enum MeshIngressDrop: String, CounterKey, CaseIterable {
    /// A frame on a link the engine was not told about.
    case unknownLink = "unknown_link"
    case ownEcho = "own_echo"
    /// An RSR reply although we never send REQUEST_SYNC.
    case unsolicitedRSR = "unsolicited_rsr"
    /// |timestamp − now| above 120 s.
    case clockSkew = "clock_skew"
}

/// Where a decoder rejected bytes.
public enum MeshDecodeStage: String, Sendable, CaseIterable {
    /// The frame itself (`MeshPacket.decode`).
    case frame
    case announce
    case fragment
    /// The frame rebuilt from fragments.
    case fragmentInner = "fragment_inner"
    case carrier
    case requestSync = "request_sync"
    /// Our own packet could not be encoded (never expected; counted rather than trapped).
    case transmit
}

/// A decoder's rejection: the stage and the reason (``WireError`` with its figures zeroed, so one reason is
/// one key whatever the byte counts were). Two labels for metrics: `stage` (snake case) and `reason`
/// (``WireError/name``, e.g. `invalidValue.fragmentTotal`); ``label`` joins them for logs.
public struct MeshDecodeRejection: CounterKey {
    public let stage: MeshDecodeStage
    public let reason: WireError

    public init(_ stage: MeshDecodeStage, _ error: WireError) {
        self.stage = stage
        self.reason = error.withoutFigures
    }

    public var label: String { stage.rawValue + "." + reason.name }
}

extension WireError {
    /// The same reason with every number zeroed (the counters' key: bounded whatever the input).
    var withoutFigures: WireError {
        switch self {
        case .frameTooShort: .frameTooShort(0)
        case .unsupportedVersion: .unsupportedVersion(0)
        case .truncated(let field, _, _): .truncated(field: field, needed: 0, available: 0)
        case .payloadTooLarge: .payloadTooLarge(0)
        case .originalSizeMismatch: .originalSizeMismatch(declared: 0, actual: 0)
        case .payloadTooLargeForVersion: .payloadTooLargeForVersion(0)
        case .routeTooLong: .routeTooLong(0)
        case .tlvOverrun: .tlvOverrun(type: 0)
        case .invalidLength(let field, _): .invalidLength(field: field, length: 0)
        case .invalidValue(let field, _): .invalidValue(field: field, value: 0)
        case .trailingBytes: .trailingBytes(0)
        case .wrongType: .wrongType(0)
        case .compressedBodyMissing, .compressionRatioTooHigh, .inflateFailed, .missingTLV, .invalidUTF8: self
        }
    }
}

/// Packets that decoded but did not verify or were refused by a rule.
public enum MeshVerificationFailure: String, CounterKey, CaseIterable {
    /// SHA-256(noise key)[0..8] ≠ sender.
    case announcePeerIDMismatch = "announce_peer_id_mismatch"
    case announceBadSignature = "announce_bad_signature"
    /// TOFU: a known peer ID announced other keys.
    case announceKeyChanged = "announce_key_changed"
    /// A message from a sender with no verified announce in the table.
    case messageUnknownSender = "message_unknown_sender"
    case messageBadSignature = "message_bad_signature"
    case messageInvalidUTF8 = "message_invalid_utf8"
    /// A leave that does not verify against the sender's key (§5.5): neither applied nor relayed.
    case leaveUnverified = "leave_unverified"
    /// A broadcast voice frame, file transfer or board post from a sender with no verified announce: it
    /// cannot be verified, so it is not relayed (MESH-WIRE §7.5; other peers may still relay it).
    case mediaUnknownSender = "media_unknown_sender"
    /// A broadcast voice frame, file transfer or board post whose signature fails: not relayed (§7.5).
    case mediaBadSignature = "media_bad_signature"
}

/// Fragment handling (MESH-WIRE §6.3) and the reassembly budget (``Reassembler``).
public enum MeshFragmentEvent: String, CounterKey, CaseIterable {
    case reassembled
    /// Rejections: the fragment is not relayed either.
    case emptyChunk = "empty_chunk"
    /// Total or original type differ from the set's first fragment (Android drops the set).
    case mismatch
    /// The set went past 1 MiB of chunk bytes.
    case setTooLarge = "set_too_large"
    /// Relayed but not kept: not broadcast nor for us, or an original type this engine does not process.
    case notForUs = "not_for_us"
    /// A set dropped to make room: slots of its pool, its sender's set quota, or the pool's byte budget.
    case evictedSlot = "evicted_slot"
    case evictedSenderQuota = "evicted_sender_quota"
    case evictedBytes = "evicted_bytes"
    /// A set whose 30 s ran out.
    case expired
}

/// Nostr carriers refused by MESH-WIRE §9.2.
public enum MeshCarrierRejection: String, CounterKey, CaseIterable {
    /// An uplink (toGateway/toBridge) that is broadcast, not directed to us.
    case uplinkNotDirected = "uplink_not_directed"
    /// An uplink whose packet signature does not verify against a known depositor.
    case unverifiedDepositor = "unverified_depositor"
    /// A downlink that is directed (downlinks are broadcasts).
    case downlinkDirected = "downlink_directed"
}

/// Why the engine refused a courier envelope (0x04) addressed to us (COURIER.md §2.5).
public enum MeshCourierRejection: String, CounterKey, CaseIterable {
    /// Its sender is not a direct peer of the link it came on: relayed deposits are refused.
    case notDirect = "not_direct"
    /// Its packet signature does not verify against its sender's announced (or pinned) key.
    case unverifiedDepositor = "unverified_depositor"
}

/// The dedup set (``DedupSet``): a hit in a pool drops the packet; capacity trims evict the oldest keys
/// of one pool only.
public struct MeshDedupEvent: CounterKey {
    public enum Kind: String, Sendable, CaseIterable {
        case duplicate
        case evicted
    }

    public let kind: Kind
    public let pool: DedupPool

    public init(_ kind: Kind, _ pool: DedupPool) {
        self.kind = kind
        self.pool = pool
    }

    public var label: String { kind.rawValue + "." + pool.rawValue }
}

/// What happened to packets the engine could relay (§7.5).
public enum MeshRelayOutcome: String, CounterKey, CaseIterable {
    case sent
    case ttlExhausted = "ttl_exhausted"
    /// Not relayed because the engine rejected the packet (a decoder or verification failure, a refused
    /// fragment): we never relay what we reject.
    case refusedRejected = "refused_rejected"
}

/// The bridge's relay gate (``RelayGate``): public messages held for the owner's verdict.
public enum MeshRelayGateOutcome: String, CounterKey, CaseIterable {
    /// The judgement passed it: relayed.
    case released
    /// The judgement hid it: never relayed (issue 23: this was `withheld`, which the README uses for a verdict
    /// that never came).
    case hidden
    /// No verdict within the gate's 5 s: withheld (every other peer in range still relays it).
    case expired
    case overflow
    case cachedRelay = "cached_relay"
    case cachedWithhold = "cached_withhold"
    /// Public messages nothing can attribute (unknown sender, bad signature), not relayed by the bridge.
    case unattributed
}

/// The peer table (``PeerTable``).
public enum MeshPeerEvent: String, CounterKey, CaseIterable {
    /// A new identity verified (first-contact pool, or established at once when its announce binds a link).
    case added
    /// A first-contact identity moved to the established pool.
    case promoted
    /// A promotion that found the established pool full of peers with stronger evidence (stays first-contact).
    case promotionRefused = "promotion_refused"
    case lostTimeout = "lost_timeout"
    case lostLeave = "lost_leave"
    case lostEvicted = "lost_evicted"
}

/// Pins held beyond the live table (``PinBook``).
public enum MeshPinEvent: String, CounterKey, CaseIterable {
    /// A message, leave or deposit from a peer outside the live table verified against its pin.
    case verifiedByPin = "verified_by_pin"
    /// An announce whose keys conflict with the pin of its peer ID (live or not): refused.
    case refused
    /// A first contact not pinned because the book was full.
    case bookFull = "book_full"
    /// Pins the owner removed (its cache forgot them).
    case forgotten
}

/// Our own transmissions.
public enum MeshTransmitEvent: String, CounterKey, CaseIterable {
    case fragmented
    /// More than 256 fragments would be needed (Android's limit): not sent.
    case cannotFragment = "cannot_fragment"
    case signFailed = "sign_failed"
}

/// Packet types as counter keys (`rx`, `originated`); every unknown type is labelled `unknown` (issue 23: a
/// label per hex value let garbage frames make up to 256 series).
extension MessageType: CounterKey {
    public var label: String { name ?? "unknown" }
}

/// Everything the engine counts, as typed families. Read a count with e.g.
/// `counters.relayGate[.released]` or `counters.decode[MeshDecodeRejection(.frame, error)]`.
///
/// Iterating yields every non-zero count under its dotted name (`relay.gate.released`,
/// `decode.frame.truncated.header`, …) for logs and for callers written before the families existed.
public struct MeshCounters: Sendable, Equatable, Sequence {
    public internal(set) var ingress = Tally<MeshIngressDrop>()
    public internal(set) var decode = Tally<MeshDecodeRejection>()
    public internal(set) var verification = Tally<MeshVerificationFailure>()
    public internal(set) var fragment = Tally<MeshFragmentEvent>()
    public internal(set) var carrier = Tally<MeshCarrierRejection>()
    public internal(set) var courier = Tally<MeshCourierRejection>()
    public internal(set) var dedup = Tally<MeshDedupEvent>()
    public internal(set) var relay = Tally<MeshRelayOutcome>()
    public internal(set) var relayGate = Tally<MeshRelayGateOutcome>()
    public internal(set) var peers = Tally<MeshPeerEvent>()
    public internal(set) var pins = Tally<MeshPinEvent>()
    /// Direct announces' claims on our links (``LinkBindings``).
    public internal(set) var links = Tally<MeshLinkBindingEvent>()
    /// Packets processed, by type (after the ingress gate and dedup).
    public internal(set) var received = Tally<MessageType>()
    /// Packets we originated, by type.
    public internal(set) var originated = Tally<MessageType>()
    public internal(set) var transmit = Tally<MeshTransmitEvent>()

    public init() {}

    /// Packets dropped as duplicates, all pools.
    public var duplicates: Int { dedup.counts.filter { $0.key.kind == .duplicate }.values.reduce(0, +) }

    /// Every non-zero count with its dotted name (family prefix + label).
    public var named: [(name: String, count: Int)] {
        func prefixed<K>(_ prefix: String, _ counts: Tally<K>) -> [(name: String, count: Int)] {
            counts.sortedByLabel.filter { $0.count != 0 }.map { (name: prefix + "." + $0.key.label, count: $0.count) }
        }
        return prefixed("ingress", ingress) + prefixed("decode", decode) + prefixed("verification", verification)
            + prefixed("fragment", fragment) + prefixed("carrier", carrier) + prefixed("courier", courier) + prefixed("dedup", dedup)
            + prefixed("relay", relay) + prefixed("relay.gate", relayGate) + prefixed("peers", peers) + prefixed("pins", pins)
            + prefixed("links", links)
            + prefixed("rx", received) + prefixed("originated", originated) + prefixed("tx", transmit)
    }

    public func makeIterator() -> IndexingIterator<[(name: String, count: Int)]> { named.makeIterator() }
}
