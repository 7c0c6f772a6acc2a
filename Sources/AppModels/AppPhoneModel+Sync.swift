import BitchatWire
import BotCrypto
import Mesh
import MeshSync

/// The apps' gossip store (announces and public messages only: the model keeps no fragments, files or board) and
/// both sides of REQUEST_SYNC.
struct GossipStore: Sendable {
    /// The latest announce per sender.
    var announces: [MeshPeerID: MeshPacket] = [:]
    /// Broadcast public messages in the order they were kept.
    var messages: [MeshPacket] = []
    var messageIDs: Set<[UInt8]> = []

    /// iOS `GossipSyncManager.removeState`, Android `removeAnnouncementForPeer`: the sender's announce and messages.
    mutating func removeState(_ sender: MeshPeerID) {
        announces[sender] = nil
        messages.removeAll { $0.sender == sender }
        messageIDs = Set(messages.map(MeshMessageIdentity.packetID))
    }

    mutating func append(_ packet: MeshPacket, capacity: Int) {
        guard messageIDs.insert(MeshMessageIdentity.packetID(packet)).inserted else { return }
        messages.append(packet)
        while messages.count > capacity { messageIDs.remove(MeshMessageIdentity.packetID(messages.removeFirst())) }
    }
}

extension AppPhoneModel {
    /// iOS `GossipSyncManager._onPublicPacketSeen` for an announce: refused past 900 s; past 60 s it takes its sender's
    /// state with it (`removeState`) instead of being kept; otherwise it replaces the sender's stored one.
    mutating func storeAnnounceIOS(_ packet: MeshPacket, now: UInt64) {
        guard packet.timestamp + Rules.iOSAnnounceMaxAgeMs >= now else { return }
        if packet.timestamp + Rules.iOSStaleAnnounceMs < now {
            store.removeState(packet.sender)
        } else {
            store.announces[packet.sender] = packet
        }
    }

    /// A broadcast message for the store (iOS 6 h and 1,000; Android 500).
    mutating func storeMessage(_ packet: MeshPacket, now: UInt64) {
        store.append(packet, capacity: app == .iOS ? Rules.iOSMessageCapacity : Rules.androidMessageCapacity)
    }

    /// iOS `GossipSyncManager.performPeriodicMaintenance` (every 30 s): messages past 6 h go; announces whose own
    /// timestamp is over 60 s old take their sender's messages with them (`cleanupStaleAnnouncements`).
    mutating func pruneIOS(now: UInt64) {
        store.messages.removeAll { $0.timestamp + Rules.iOSMessageMaxAgeMs < now }
        store.messageIDs = Set(store.messages.map(MeshMessageIdentity.packetID))
        for (sender, announce) in store.announces where announce.timestamp + Rules.iOSStaleAnnounceMs < now {
            store.removeState(sender)
        }
    }

    // MARK: Asking

    /// The periodic rounds. iOS (`GossipSyncManager`, 30 s tick): announce + message to every connected peer each tick,
    /// and every other tick a separate request each for fragments, files, prekey bundles and the board — five at once
    /// to each peer; with no connected peer one broadcast request, not registered. Android (`GossipSyncManager.start`):
    /// one broadcast request every 30 s.
    mutating func syncTick(now: UInt64, into out: inout [MeshAction]) {
        if app == .android { return request([.announce, .message], to: nil, now: now, into: &out) }
        pruneIOS(now: now)
        let connected = peers.filter(\.value.connected).keys.sorted()
        var rounds: [SyncTypes] = [[.announce, .message, .groupMessage]]
        if syncTicks % 2 == 0 { rounds += [.fragment, .fileTransfer, .prekeyBundle, .board] }
        syncTicks += 1
        if connected.isEmpty { return request(rounds[0], to: nil, now: now, into: &out) }
        for peer in connected {
            for types in rounds { request(types, to: peer, now: now, into: &out) }
        }
    }

    /// The request 1 s after a direct announce: iOS the union of every type it syncs; Android announce + message,
    /// dropped when the peer owns no live link by then (`sendPacketToPeer`).
    mutating func initialSync(to peer: MeshPeerID, now: UInt64, into out: inout [MeshAction]) {
        request(app == .iOS ? .iOSInitialUnion : [.announce, .message], to: peer, now: now, into: &out)
    }

    /// A signed REQUEST_SYNC (TTL 0) with a filter of what the store holds (`buildGcsPayload`). iOS sends a directed
    /// one on the peer's bound links (all links when it has none) and opens the 30 s reply window for the peer; Android
    /// only on a link the peer owns.
    mutating func request(_ types: SyncTypes, to peer: MeshPeerID?, now: UInt64, into out: inout [MeshAction]) {
        var candidates: [(id: [UInt8], timestamp: UInt64)] = []
        if types.contains(.announce) { candidates += store.announces.values.map { (MeshMessageIdentity.packetID($0), $0.timestamp) } }
        if types.contains(.message) { candidates += store.messages.map { (MeshMessageIdentity.packetID($0), $0.timestamp) } }
        let payload = RequestSyncPayload.build(types: types, candidates: candidates)
        let packet = signed(MeshPacket(type: .requestSync, ttl: 0, timestamp: now, sender: peerID, recipient: peer, payload: payload.encode()))
        let targets = route(to: peer)
        guard !targets.isEmpty else { return drop(.unroutable) }
        if app == .iOS, let peer { requestsTo[peer] = now }
        report.requestsSent.append((peer, types))
        send(packet, on: targets, into: &out)
    }

    /// The links a packet for `peer` goes on: those it owns; iOS falls back to every link, Android sends nowhere.
    func route(to peer: MeshPeerID?) -> [MeshLinkID] {
        guard let peer else { return Array(links.keys) }
        let owned = links.filter { $0.value == peer }.map(\.key)
        return owned.isEmpty && app == .iOS ? Array(links.keys) : owned
    }

    // MARK: Answering

    /// iOS `BLEService.handleRequestSync` + `GossipSyncManager._handleRequestSync`: TTL 0, signed by the requester's
    /// known key, at most 8 answered per requester per 30 s; Android `GossipSyncManager.handleRequestSync`: no checks,
    /// no limit. Then every stored announce and message whose ID the filter lacks (messages from `since` on) goes back
    /// at TTL 0 — with RSR on iOS, without on Android (it has no such flag) — to the requester's links.
    mutating func answer(_ packet: MeshPacket, now: UInt64, into out: inout [MeshAction]) {
        let requester = packet.sender
        guard let request = try? RequestSyncPayload.decode(packet.payload) else { return drop(.requestRejected) }
        if app == .iOS {
            guard packet.ttl == 0, let key = peers[requester]?.signingKey, packet.verifySignature(key).isValid else { return drop(.requestRejected) }
            let recent = (answers[requester] ?? []).filter { $0 + Rules.iOSAnswerWindowMs >= now }
            guard recent.count < Rules.iOSMaxAnswersPerWindow else { return drop(.requestRateLimited) }
            answers[requester] = recent + [now]
        }
        let targets = route(to: requester)
        guard !targets.isEmpty else { return drop(.unroutable) }
        report.answered[requester, default: 0] += 1
        let filter = GCSFilter.Membership(request)
        let since = request.sinceTimestamp ?? 0
        var due: [MeshPacket] = []
        if request.requestedTypes.contains(.announce) { due += store.announces.values.sorted { $0.timestamp < $1.timestamp } }
        if request.requestedTypes.contains(.message) { due += store.messages.filter { $0.timestamp >= since } }
        for stored in due where !filter.mightContain(h64: GCSFilter.h64(MeshMessageIdentity.packetID(stored))) {
            var copy = stored
            copy.ttl = 0
            copy.isRSR = app == .iOS
            report.replies.append(Reply(requester: requester, sender: stored.sender, type: stored.type))
            send(copy, on: targets, into: &out)
        }
    }
}
