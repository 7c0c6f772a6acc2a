public import BitchatWire

/// One REQUEST_SYNC to send: to `peer` (unicast, TTL 0, signed by the caller), covering `types`.
public struct SyncRound: Sendable, Equatable {
    public var peer: MeshPeerID
    public var types: SyncTypes
    public init(peer: MeshPeerID, types: SyncTypes) {
        self.peer = peer
        self.types = types
    }
}

/// When the bridge asks its direct peers for what it missed, as iOS does (BOARD.md §8, §9.4 "Ours", §9.5,
/// §13.1–2), and which RSR replies it takes. A pure scheduler: the caller passes the time, calls ``due(now:)``
/// at or after ``nextWakeUp``, and sends the rounds it returns; every round it returns is registered for the
/// RSR window.
///
/// - message round (announce + message, `03`) every 30 s to every direct peer — iOS's effective cadence;
///   group messages are not asked for since the bridge does not keep them (it would be re-sent them every round);
/// - board round (`00 01`) every 60 s;
/// - 1 s after a new direct peer: the union it stores, announce + message + board (`03 01`);
/// - an RSR frame is taken only within 30 s of a request to the link's bound peer (iOS `RequestSyncManager`;
///   on an unbound link, to the packet's claimed sender — MESH-WIRE §7.4);
/// - requests to one peer are spaced as Android (PR #885) answers a link — at most one per 5 s after a burst of 2
///   (a link binds one identity, so per peer is per link): a round that finds none left waits, its types merged into
///   the next request to that peer, instead of being sent to be dropped.
public struct SyncRequester: Sendable {
    public struct Configuration: Sendable, Equatable {
        public var messageIntervalMs: UInt64 = 30_000
        public var boardIntervalMs: UInt64 = 60_000
        /// iOS schedules the initial union 1 s after a new direct announce (`BLEService.swift:6543`).
        public var initialDelayMs: UInt64 = 1_000
        /// iOS `RequestSyncManager.responseWindow`.
        public var replyWindowMs: UInt64 = 30_000
        public var messageTypes: SyncTypes = .publicMessages
        public var boardTypes: SyncTypes = .board
        public var initialTypes: SyncTypes = [.announce, .message, .board]
        /// Ours: direct peers tracked at most (a BLE radio has a handful; bounds the tables).
        public var maxPeers = 64
        /// Requests to one peer: at most `requestBurst` at once, then one per `requestSpacingMs`.
        public var requestBurst = 2
        public var requestSpacingMs: UInt64 = 5_000
        public init() {}
    }

    public let configuration: Configuration
    private var peers: Set<MeshPeerID> = []
    private var initialDue: [MeshPeerID: UInt64] = [:]
    private var lastRequest: [MeshPeerID: UInt64] = [:]
    /// Per peer: when its next request may go (a virtual schedule: `requestBurst` may be ahead of it).
    private var turns: [MeshPeerID: UInt64] = [:]
    /// Types of rounds that found no turn left, per peer: sent together at its next turn.
    private var waiting: [MeshPeerID: SyncTypes] = [:]
    private var nextMessageRound: UInt64
    private var nextBoardRound: UInt64

    /// `start`: ms; the first periodic rounds go out one message interval later (iOS: the first 30 s tick).
    public init(configuration: Configuration = Configuration(), start: UInt64) {
        self.configuration = configuration
        nextMessageRound = start + configuration.messageIntervalMs
        nextBoardRound = start + configuration.messageIntervalMs
    }

    public var directPeers: Set<MeshPeerID> { peers }

    /// A direct peer appeared (or reconnected): its initial union is due `initialDelayMs` later.
    public mutating func directPeerConnected(_ peer: MeshPeerID, now: UInt64) {
        guard peers.contains(peer) || peers.count < configuration.maxPeers else { return }
        peers.insert(peer)
        initialDue[peer] = now + configuration.initialDelayMs
    }

    public mutating func directPeerDisconnected(_ peer: MeshPeerID) {
        peers.remove(peer)
        initialDue[peer] = nil
        waiting[peer] = nil
    }

    /// The earliest time ``due(now:)`` has something to return; nil when it can return nothing (no direct peer:
    /// periodic rounds are skipped then, so nothing is due until a peer connects).
    public var nextDue: UInt64? { peers.isEmpty ? nil : nextWakeUp }

    /// The earliest time ``due(now:)`` has something to return.
    public var nextWakeUp: UInt64 {
        var next = min(nextMessageRound, nextBoardRound)
        if let initial = initialDue.values.min() { next = min(next, initial) }
        if let turn = waiting.keys.compactMap({ turns[$0] }).min() { next = min(next, earliest(turn)) }
        return next
    }

    /// When a peer whose schedule stands at `turn` may be asked again.
    private func earliest(_ turn: UInt64) -> UInt64 {
        turn - min(turn, UInt64(max(1, configuration.requestBurst) - 1) * configuration.requestSpacingMs)
    }

    /// Takes one of `peer`'s turns at `now`, if one is left.
    private mutating func takeTurn(_ peer: MeshPeerID, now: UInt64) -> Bool {
        let next = max(turns[peer] ?? now, now)
        guard earliest(next) <= now else { return false }
        turns[peer] = next + configuration.requestSpacingMs
        return true
    }

    /// The rounds due at `now`, each registered for the RSR window. Periodic rounds with no direct peers are
    /// skipped (not queued): iOS falls back to a broadcast there, the bridge has no one to ask.
    public mutating func due(now: UInt64) -> [SyncRound] {
        var rounds: [SyncRound] = []
        for (peer, at) in initialDue.sorted(by: { $0.key < $1.key }) where at <= now {
            initialDue[peer] = nil
            rounds.append(SyncRound(peer: peer, types: configuration.initialTypes))
        }
        if now >= nextMessageRound {
            rounds += peers.sorted().map { SyncRound(peer: $0, types: configuration.messageTypes) }
            nextMessageRound = Self.next(after: now, from: nextMessageRound, every: configuration.messageIntervalMs)
        }
        if now >= nextBoardRound {
            rounds += peers.sorted().map { SyncRound(peer: $0, types: configuration.boardTypes) }
            nextBoardRound = Self.next(after: now, from: nextBoardRound, every: configuration.boardIntervalMs)
        }
        // Rounds that waited go first (their types with the peer's next due round), then the rest while turns last.
        var sent: [SyncRound] = []
        for (peer, types) in waiting.sorted(by: { $0.key < $1.key }) where takeTurn(peer, now: now) {
            waiting[peer] = nil
            var merged = types
            if let index = rounds.firstIndex(where: { $0.peer == peer }) { merged.formUnion(rounds.remove(at: index).types) }
            sent.append(SyncRound(peer: peer, types: merged))
        }
        for round in rounds {
            if waiting[round.peer] == nil, takeTurn(round.peer, now: now) {
                sent.append(round)
            } else {
                waiting[round.peer, default: []].formUnion(round.types)
            }
        }
        for round in sent { lastRequest[round.peer] = now }
        lastRequest = lastRequest.filter { $0.value > now || now - $0.value <= configuration.replyWindowMs }
        turns = turns.filter { $0.value > now || waiting[$0.key] != nil }
        return sent
    }

    /// Registers a request sent outside the schedule (e.g. a targeted fragment resync).
    public mutating func registerRequest(to peer: MeshPeerID, now: UInt64) { lastRequest[peer] = now }

    /// Whether an RSR frame may be taken: a request within the last 30 s to one of the link's direct peers
    /// `linkPeers` (an RSR frame is a stored packet, its sender is the original author, not the responder;
    /// on a shared segment any of its direct peers may be answering), or, on a link with none, to the
    /// claimed `sender`.
    public func acceptsReply(linkPeers: Set<MeshPeerID>, sender: MeshPeerID, now: UInt64) -> Bool {
        func recent(_ at: UInt64) -> Bool { now >= at && now - at <= configuration.replyWindowMs }
        guard !linkPeers.isEmpty else { return lastRequest[sender].map(recent) ?? false }
        return lastRequest.contains { linkPeers.contains($0.key) && recent($0.value) }
    }

    private static func next(after now: UInt64, from scheduled: UInt64, every interval: UInt64) -> UInt64 {
        let step = max(1, interval)
        guard now >= scheduled else { return scheduled }
        return scheduled + ((now - scheduled) / step + 1) * step
    }

    /// The request payload for `types` from what the bridge holds (iOS `buildGcsPayload`, BOARD.md §9.2).
    public static func payload(
        types: SyncTypes, gossip: any GossipPacketStore, board: any BoardPacketStore, now: UInt64
    ) -> RequestSyncPayload {
        payload(types: types, from: StoreReplySource(gossip: gossip, board: board), now: now)
    }

    /// The request payload from any ``SyncReplySource`` (the bridge core's ``SyncStores`` value).
    public static func payload(types: SyncTypes, from source: some SyncReplySource, now: UInt64) -> RequestSyncPayload {
        var candidates: [(id: [UInt8], timestamp: UInt64)] = []
        for kind in SyncStoreKind.allCases where types.contains(kind.syncType) {
            candidates += source.packets(kind, now: now).map { ($0.id, $0.timestamp) }
        }
        return RequestSyncPayload.build(types: types, candidates: candidates)
    }
}
