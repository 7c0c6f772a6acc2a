public import BitchatWire
public import BotCrypto
public import BotSupport

/// One REQUEST_SYNC as it reached the engine, with what the responder must know about its link and sender.
public struct SyncRequestInput: Sendable, Equatable {
    public var packet: MeshPacket
    /// The direct peers of the ingress link (MESH-WIRE §4.7.6: the peers whose origin-TTL announce verified
    /// on it): one on a BLE link, any number on a shared radio segment; empty on a link none announced on yet.
    public var linkPeers: Set<MeshPeerID>
    /// The Ed25519 key pinned for ``MeshPacket/sender`` from its verified announce, nil when none is known.
    public var pinnedKey: Ed25519PublicKey?

    public init(packet: MeshPacket, linkPeers: Set<MeshPeerID>, pinnedKey: Ed25519PublicKey?) {
        self.packet = packet
        self.linkPeers = linkPeers
        self.pinnedKey = pinnedKey
    }
}

/// Why a request got nothing (BOARD.md §9.4: silently ignored). Every refusal is counted.
public enum SyncRefusal: String, CounterKey, CaseIterable, Sendable {
    /// TTL ≠ 0 (REQUEST_SYNC is link-local).
    case ttlNotZero = "ttl_not_zero"
    /// The sender is not a direct peer of the link the request came on (a link with direct peers only
    /// answers them; iOS binds a link to its one peer, BOARD.md §9.4 check 2).
    case senderNotLinkPeer = "sender_not_link_peer"
    /// No signature.
    case unsigned
    /// No key is pinned for the sender (no verified announce).
    case noPinnedKey = "no_pinned_key"
    /// The signature does not verify under the pinned key.
    case badSignature = "bad_signature"
    /// The payload does not decode.
    case undecodable
    /// The requester already had 8 answered requests in the last 30 s.
    case rateLimited = "rate_limited"
    /// The requester's link already had ``SyncResponder/Pacing/maxWaiting`` requests waiting for their turn.
    case linkBusy = "link_busy"
}

/// What happened to the packets an accepted request asked for.
public enum SyncReplyOutcome: String, CounterKey, CaseIterable, Sendable {
    /// Sent (one reply frame).
    case sent
    /// In the requester's filter (or before its `since`): not needed.
    case covered
    /// Due, but the airtime budget was spent: left for a later round.
    case withheldByBudget = "withheld_by_budget"
}

/// The responder's typed counters.
public struct SyncResponderCounters: Sendable, Equatable {
    public var refused = Tally<SyncRefusal>()
    /// Accepted requests.
    public var answered = 0
    /// Accepted requests that waited for their link's turn (``SyncResponder/Pacing``) before being answered.
    public var deferred = 0
    public var replies = Tally<SyncReplyOutcome>()
    /// Reply bytes sent (frame bytes; what the airtime budget counts).
    public var replyBytes = 0
    public init() {}
}

/// The answer to one request: frames to send to ``recipient``'s link, unpadded, in order.
public struct SyncAnswer: Sendable, Equatable {
    public var recipient: MeshPeerID
    public var frames: [[UInt8]]
    public var refusal: SyncRefusal?
    /// Due frames not sent for want of airtime.
    public var withheld: Int

    public static func refused(_ peer: MeshPeerID, _ reason: SyncRefusal) -> SyncAnswer {
        SyncAnswer(recipient: peer, frames: [], refusal: reason, withheld: 0)
    }
}

/// Answers REQUEST_SYNC exactly as BOARD.md §9.4 describes iOS (`BLEService.handleRequestSync` →
/// `GossipSyncManager._handleRequestSync`), paced by a shared ``AirtimeBudget``.
///
/// Checks, in iOS order: TTL 0; the sender is a direct peer of the link (when the link has any — iOS's
/// bound peer, generalised to shared segments); the signature verifies under
/// the sender's pinned key; the payload decodes; < 8 answered requests in the sliding 30 s window (the cutoff
/// inclusive). Then for the requested types (absent = announce + message), in the order announce, message,
/// fragment, file, board, every stored packet whose ID is not in the filter — and, except announces and
/// fragment-ID-targeted fragments, whose timestamp ≥ `since` — goes back as stored but TTL 0 and RSR set.
/// Pure: time is a parameter, stores are passed in, the output is data.
public struct SyncResponder: Sendable {
    /// How often one link is answered (ours, after Android PR #885, which answers a link at most once per 5 s after a
    /// burst of 2): a request beyond it waits for its turn instead of being refused — an iPhone asks five times at
    /// once every other round (messages, fragments, files, prekeys, board), and each must be answered within the 30 s
    /// it takes replies. A link binds one identity, so the requester stands for its link.
    public struct Pacing: Sendable, Equatable {
        public var burst = 2
        public var spacingMs: UInt64 = 5_000
        /// Requests of one requester waiting at most (one iPhone round's five, less the burst, plus one); more are
        /// refused (``SyncRefusal/linkBusy``).
        public var maxWaiting = 4
        public init() {}
    }

    /// An answer and where it goes: `route` is the owner's (its link), handed back as it was given.
    public struct RoutedAnswer: Sendable, Equatable {
        public var route: UInt64
        public var answer: SyncAnswer
    }

    public struct Configuration: Sendable, Equatable {
        /// Answered requests per peer per window (iOS `responseRateLimitMaxResponses`).
        public var maxRequestsPerWindow: Int
        /// iOS `responseRateLimitWindowSeconds`.
        public var requestWindowMs: UInt64
        public var airtime: AirtimeBudget.Configuration
        /// Ours: requesters whose rate-limit history is kept (oldest forgotten first), bounding the table
        /// against a flood of spoofed sender IDs — which cannot pass the signature check anyway.
        public var maxTrackedRequesters: Int
        /// Per-link pacing (the bridge); nil answers at once, as iOS does.
        public var pacing: Pacing?

        public init(
            maxRequestsPerWindow: Int = 8, requestWindowMs: UInt64 = 30_000, airtime: AirtimeBudget.Configuration = .init(),
            maxTrackedRequesters: Int = 1024, pacing: Pacing? = nil
        ) {
            self.maxRequestsPerWindow = max(1, maxRequestsPerWindow)
            self.requestWindowMs = requestWindowMs
            self.airtime = airtime
            self.maxTrackedRequesters = max(1, maxTrackedRequesters)
            self.pacing = pacing
        }
    }

    public let configuration: Configuration
    public private(set) var counters = SyncResponderCounters()
    private var budget: AirtimeBudget
    private var history: [MeshPeerID: [UInt64]] = [:]
    /// Per requester: when its next answer may go (a virtual schedule: `burst` answers may be ahead of it).
    private var turns: [MeshPeerID: UInt64] = [:]
    /// Accepted requests waiting for their requester's turn, in arrival order.
    private var waiting: [(route: UInt64, request: RequestSyncPayload, peer: MeshPeerID)] = []

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.budget = AirtimeBudget(configuration.airtime)
    }

    /// Airtime left in the current window.
    public mutating func airtimeAvailable(now: UInt64) -> Int { budget.available(now: now) }

    public mutating func answer(
        _ input: SyncRequestInput, gossip: any GossipPacketStore, board: any BoardPacketStore, now: UInt64
    ) -> SyncAnswer {
        var source = StoreReplySource(gossip: gossip, board: board)
        return answer(input, from: &source, now: now)
    }

    /// Answers from any ``SyncReplySource`` (the bridge core's ``SyncStores`` value), at once (no pacing).
    public mutating func answer(_ input: SyncRequestInput, from source: inout some SyncReplySource, now: UInt64) -> SyncAnswer {
        switch check(input, now: now) {
        case .refused(let refusal): refusal
        case .accepted(let request): reply(to: input.packet.sender, request, from: &source, now: now)
        }
    }

    /// A request that came on `route` (the owner's link): refused, answered now, or — with ``Configuration/pacing``
    /// — kept until its link's turn (``due(from:now:)``, at ``nextDue``).
    public mutating func receive(
        _ input: SyncRequestInput, route: UInt64, from source: inout some SyncReplySource, now: UInt64
    ) -> [RoutedAnswer] {
        let peer = input.packet.sender
        switch check(input, now: now) {
        case .refused(let refusal):
            return [RoutedAnswer(route: route, answer: refusal)]
        case .accepted(let request):
            guard let pacing = configuration.pacing else { return [RoutedAnswer(route: route, answer: reply(to: peer, request, from: &source, now: now))] }
            // Its turn, unless an earlier request of the same requester still waits (answers keep their order).
            if !waiting.contains(where: { $0.peer == peer }), takeTurn(peer, pacing, now: now) {
                return [RoutedAnswer(route: route, answer: reply(to: peer, request, from: &source, now: now))]
            }
            guard waiting.count(where: { $0.peer == peer }) < pacing.maxWaiting else {
                counters.refused.add(.linkBusy)
                return [RoutedAnswer(route: route, answer: .refused(peer, .linkBusy))]
            }
            counters.deferred += 1
            waiting.append((route, request, peer))
            return []
        }
    }

    /// When a waiting request's turn comes (nil: none waits).
    public var nextDue: UInt64? {
        guard let pacing = configuration.pacing else { return nil }
        return waiting.compactMap { turns[$0.peer].map { $0 - min($0, UInt64(pacing.burst - 1) * pacing.spacingMs) } }.min()
    }

    /// The waiting requests whose turn has come, answered from the stores as they are now, oldest first.
    public mutating func due(from source: inout some SyncReplySource, now: UInt64) -> [RoutedAnswer] {
        guard let pacing = configuration.pacing else { return [] }
        var out: [RoutedAnswer] = []
        var index = 0
        var served: Set<MeshPeerID> = []
        while index < waiting.count {
            let item = waiting[index]
            // One per requester and pass, in order: its next one waits for the turn after.
            guard !served.contains(item.peer), takeTurn(item.peer, pacing, now: now) else {
                index += 1
                continue
            }
            served.insert(item.peer)
            waiting.remove(at: index)
            out.append(RoutedAnswer(route: item.route, answer: reply(to: item.peer, item.request, from: &source, now: now)))
        }
        return out
    }

    /// The requester may be answered at `now` (its turn taken when so).
    private mutating func takeTurn(_ peer: MeshPeerID, _ pacing: Pacing, now: UInt64) -> Bool {
        let next = max(turns[peer] ?? now, now)
        guard next <= now + UInt64(pacing.burst - 1) * pacing.spacingMs else { return false }
        turns[peer] = next + pacing.spacingMs
        if turns.count > configuration.maxTrackedRequesters { turns = turns.filter { $0.value > now } }
        return true
    }

    private enum Checked {
        case refused(SyncAnswer)
        case accepted(RequestSyncPayload)
    }

    /// The checks, in iOS order, and the payload when they pass (an accepted request is counted against the 8 a 30 s).
    private mutating func check(_ input: SyncRequestInput, now: UInt64) -> Checked {
        let packet = input.packet
        let peer = packet.sender
        func refuse(_ reason: SyncRefusal) -> Checked {
            counters.refused.add(reason)
            return .refused(.refused(peer, reason))
        }
        guard packet.ttl == 0 else { return refuse(.ttlNotZero) }
        if !input.linkPeers.isEmpty, !input.linkPeers.contains(peer) { return refuse(.senderNotLinkPeer) }
        guard packet.signature != nil else { return refuse(.unsigned) }
        guard let key = input.pinnedKey else { return refuse(.noPinnedKey) }
        guard packet.verifySignature(key).isValid else { return refuse(.badSignature) }
        guard let request = try? RequestSyncPayload.decode(packet.payload) else { return refuse(.undecodable) }
        guard admit(peer, now: now) else { return refuse(.rateLimited) }
        return .accepted(request)
    }

    /// The reply frames within the airtime budget.
    private mutating func reply(to peer: MeshPeerID, _ request: RequestSyncPayload, from source: inout some SyncReplySource, now: UInt64) -> SyncAnswer {
        counters.answered += 1
        let due = Self.replySet(request, from: &source, now: now)
        counters.replies.add(.covered, due.covered)
        var frames: [[UInt8]] = []
        var withheld = 0
        for stored in due.packets {
            let frame = stored.replyFrame
            if withheld == 0, budget.spend(frame.count, now: now) {
                frames.append(frame)
                counters.replyBytes += frame.count
            } else {
                // Keep iOS order: once the budget is out, the rest waits for the next round (the requester's
                // next filter lists what it got, so nothing is sent twice).
                withheld += 1
            }
        }
        counters.replies.add(.sent, frames.count)
        counters.replies.add(.withheldByBudget, withheld)
        return SyncAnswer(recipient: peer, frames: frames, refusal: nil, withheld: withheld)
    }

    /// iOS `SyncResponseRateLimiter.shouldRespond`: keep the times ≥ now − window; admit (and record) when
    /// fewer than the maximum remain.
    private mutating func admit(_ peer: MeshPeerID, now: UInt64) -> Bool {
        let cutoff = now >= configuration.requestWindowMs ? now - configuration.requestWindowMs : 0
        var recent = (history[peer] ?? []).filter { $0 >= cutoff }
        guard recent.count < configuration.maxRequestsPerWindow else {
            history[peer] = recent
            return false
        }
        recent.append(now)
        if history[peer] == nil, history.count >= configuration.maxTrackedRequesters {
            history = history.filter { $0.value.contains { $0 >= cutoff } }
            if history.count >= configuration.maxTrackedRequesters,
                let oldest = history.min(by: { ($0.value.last ?? 0) < ($1.value.last ?? 0) })?.key
            {
                history[oldest] = nil
            }
        }
        history[peer] = recent
        return true
    }

    /// The packets a request is due, in reply order, and how many it already holds. Public so the benchmark
    /// and tests can time and check the choice apart from the checks.
    public static func replySet(
        _ request: RequestSyncPayload, gossip: any GossipPacketStore, board: any BoardPacketStore, now: UInt64
    ) -> (packets: [SyncPacket], covered: Int) {
        var source = StoreReplySource(gossip: gossip, board: board)
        return replySet(request, from: &source, now: now)
    }

    public static func replySet(
        _ request: RequestSyncPayload, from source: inout some SyncReplySource, now: UInt64
    ) -> (packets: [SyncPacket], covered: Int) {
        let types = request.requestedTypes
        let filter = GCSFilter.Membership(request)
        let since = request.sinceTimestamp ?? 0
        var out: [SyncPacket] = []
        var covered = 0
        // (timestamp, h64) → due? With and without the since cursor (announces and targeted fragments are exempt).
        let dueAfterSince: (UInt64, UInt64) -> Bool = { timestamp, h64 in timestamp >= since && !filter.mightContain(h64: h64) }
        let dueAnyTime: (UInt64, UInt64) -> Bool = { _, h64 in !filter.mightContain(h64: h64) }
        func take(_ chosen: (selected: [SyncPacket], declined: Int)) {
            out += chosen.selected
            covered += chosen.declined
        }
        if types.contains(.announce) { take(source.select(.announce, now: now, where: dueAnyTime)) }
        if types.contains(.message) {
            let messages = source.select(.message, now: now, where: dueAfterSince)
            let ahead = Self.announcesAhead(of: messages.selected, sent: out, from: &source, now: now)
            if types.contains(.announce) { covered -= ahead.count }  // they were counted as held
            out += ahead
            take(messages)
        }
        if types.contains(.fragment) {
            let streams = Set(request.fragmentIDs)
            if streams.isEmpty {
                take(source.select(.fragment, now: now, where: dueAfterSince))
            } else {
                // Targeted resync: only the named streams (payload[0..8]), the since cursor bypassed.
                for packet in source.packets(.fragment, now: now) {
                    guard let stream = Self.fragmentStream(packet), streams.contains(stream) else { continue }
                    if dueAnyTime(packet.timestamp, packet.h64) { out.append(packet) } else { covered += 1 }
                }
            }
        }
        if types.contains(.fileTransfer) { take(source.select(.fileTransfer, now: now, where: dueAfterSince)) }
        if types.contains(.board) { take(source.select(.board, now: now, where: dueAfterSince)) }
        return (out, covered)
    }

    /// The announces of `messages`' senders not already in the reply (`sent`), to go ahead of the messages (ours; iOS
    /// and Android send only what the filter lacks). Both apps drop a message whose sender they hold no verified
    /// announce for (iOS `BLEPublicMessagePolicy`, Android `SecurityManager.validatePacket`), and a filter's "holds"
    /// includes its false positives: at P 7, one announce in 128 the phone lacks, and then every line of that sender
    /// went unshown (the world's late-iPhone test met it about one run in six, its keys drawn at random). An announce
    /// the phone does hold costs ~200 bytes and is dropped there as a duplicate. A request that asked for no announces
    /// gets its messages' senders' announces too: without them its messages would be dropped all the same.
    static func announcesAhead(
        of messages: [SyncPacket], sent: [SyncPacket], from source: inout some SyncReplySource, now: UInt64
    ) -> [SyncPacket] {
        var senders = Set(messages.map(\.sender))
        for packet in sent where packet.type == .announce { senders.remove(packet.sender) }
        guard !senders.isEmpty else { return [] }
        return source.packets(.announce, now: now).filter { senders.contains($0.sender) }
    }

    /// A fragment's stream ID: payload[0..8].
    static func fragmentStream(_ packet: SyncPacket) -> UInt64? {
        let payload = packet.packet.payload
        guard payload.count >= 8 else { return nil }
        return payload.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }
}
