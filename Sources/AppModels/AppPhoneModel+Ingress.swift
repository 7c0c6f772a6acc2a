import BitchatWire
import BotCrypto
import BotSupport
import Mesh
import MeshSync

/// What each app does with a packet it received: the guard, the link binding, the handlers.
extension AppPhoneModel {
    // MARK: iOS

    /// iOS `BLEService.attributeAndHandlePacket`: the ingress guard judged against the link's bound peer, the raw
    /// bind of a direct announce, dedup, the bound peer's last-seen, then the handler.
    mutating func receiveIOS(_ packet: MeshPacket, on link: MeshLinkID, now: UInt64, into out: inout [MeshAction]) {
        let bound = owner(of: link)
        let sender = packet.sender
        let directAnnounce = packet.type == .announce && packet.ttl == MeshPacket.Limits.originTTL
        // `BLEIngressPacketGuard.validate`: own echo (but an RSR copy at TTL 0), a REQUEST_SYNC from another ID than
        // the bound one, an RSR without our request to the link's peer, a live packet off by more than 120 s.
        if sender == peerID, !(packet.isRSR && packet.ttl == 0) { return drop(.selfLoopback) }
        if let bound, bound != sender, packet.type == .requestSync { return drop(.directSenderMismatch) }
        if packet.isRSR {
            let validator = bound ?? sender
            guard let asked = requestsTo[validator], now >= asked, now - asked <= Rules.iOSReplyWindowMs else { return drop(.invalidRSR) }
        } else if Self.distance(packet.timestamp, now) > Rules.iOSMaxSkewMs {
            return drop(.timestampSkew)
        }
        // `attributeAndHandlePacket`: a TTL-7 announce binds an unbound link (before its signature is checked).
        if directAnnounce, bound == nil {
            links[link] = .some(sender)
            report.events.append(.linkOwner(link, sender))
        }
        // `BLEReceivePipeline` / `MessageDeduplicator`: 300 s, marked even when a handler drops the packet.
        let key = MeshMessageIdentity.dedupKey(packet)
        if let at = seen[key], now < at + Rules.iOSDedupMs { return drop(.duplicate) }
        seen[key] = now
        // `updatePeerLastSeen(receivedFromPeerID)`: traffic on a bound link refreshes the link's peer.
        let receivedFrom = directAnnounce || bound == nil ? sender : bound!
        if peers[receivedFrom] != nil, !(packet.type == .announce && receivedFrom == sender) { peers[receivedFrom]?.lastSeen = now }
        switch packet.type {
        case .announce: announceIOS(packet, on: link, direct: directAnnounce, now: now, into: &out)
        case .message: messageIOS(packet, now: now)
        case .requestSync: answer(packet, now: now, into: &out)
        case .leave:
            if let key = peers[sender]?.signingKey ?? remembered[sender], packet.verifySignature(key).isValid {
                if peers[sender]?.connected == true { report.events.append(.disconnected(sender)) }
                remove(sender, reason: "leave")
            }
        default:
            break  // Relayed by the app under the TTL rules, never stored (`BLEService` ~6046); the model does not relay.
        }
    }

    /// iOS `BLEAnnounceHandler.handle`, `BLEPeerRegistry.upsertVerifiedAnnounce`, `BLEAnnounceResponsePolicy`, then
    /// `BLEService.handleAnnounce` → `rebindLinkAfterVerifiedDirectAnnounce`.
    mutating func announceIOS(_ packet: MeshPacket, on link: MeshLinkID, direct: Bool, now: UInt64, into out: inout [MeshAction]) {
        let sender = packet.sender
        // `BLEAnnouncePreflightPolicy.evaluate`: decodes, the ID is the Noise key's, not ours, not older than 900 s.
        guard let payload = try? AnnouncePayload.decode(packet.payload), MeshPeerID(noisePublicKey: payload.noisePublicKey) == sender,
              sender != peerID, packet.timestamp + Rules.iOSAnnounceMaxAgeMs >= now
        else { return drop(.announceRejected, packet) }
        // Announce-back once per sender per dedup lifetime (forced `sendAnnounce`), verified or not.
        if now >= announcedBack[sender] ?? 0 {
            announcedBack[sender] = now + Rules.iOSDedupMs
            announce(now: now, on: Array(links.keys), into: &out)
        }
        // `BLEAnnounceTrustPolicy`: the Noise key and a pinned signing key may not change; the signature must hold.
        let known = peers[sender]
        guard let key = try? Ed25519PublicKey(rawRepresentation: payload.signingPublicKey),
              known.map({ $0.noiseKey == payload.noisePublicKey }) ?? true,
              (known?.signingKey ?? remembered[sender]).map({ $0 == key }) ?? true,
              packet.verifySignature(key).isValid
        else {
            // Unverified announces still reach the gossip store (`onPublicPacketSeen`), as iOS does.
            storeAnnounceIOS(packet, now: now)
            return drop(.announceRejected, packet)
        }
        let boundToOther = owner(of: link).map { $0 != sender } ?? false
        let connected = links.values.contains(sender) || (direct && !boundToOther)
        let wasDisconnected = known.map { !$0.connected } ?? true
        peers[sender] = Peer(nickname: payload.nickname, noiseKey: payload.noisePublicKey, signingKey: key, lastSeen: now,
                             connected: connected || (known?.connected ?? false))
        remembered[sender] = key
        storeAnnounceIOS(packet, now: now)
        // `BLEAnnounceResponsePolicy`: a direct announce from a new or disconnected peer is "connected" and gets a
        // REQUEST_SYNC 1 s later — even when the link belongs to someone else (the entry then stays disconnected).
        if direct, wasDisconnected {
            report.events.append(.connected(sender))
            initialSyncs.append((now + Rules.initialSyncDelayMs, sender))
        }
        if direct { rebindIOS(link, to: sender, now: now) }
    }

    /// iOS `rebindLinkAfterVerifiedDirectAnnounce`: a verified direct announce from another ID than the link's
    /// takes the link when that ID has no binding of its own and the link was not rebound in the last 60 s; the
    /// old ID is retired (`retireRotatedPeer`: out of the list with its gossip state, "disconnected").
    mutating func rebindIOS(_ link: MeshLinkID, to sender: MeshPeerID, now: UInt64) {
        guard let previous = owner(of: link), previous != sender else { return }
        guard !links.values.contains(sender) else { return }
        if let last = lastRebind[link], now < last + Rules.iOSRebindCooldownMs { return }
        lastRebind[link] = now
        links[link] = .some(sender)
        peers[sender]?.connected = true
        report.events.append(.linkOwner(link, sender))
        for (other, owner) in links where owner == previous { links[other] = .some(nil) }
        if peers[previous] != nil { report.events.append(.disconnected(previous)) }
        remove(previous, reason: "rotated")
    }

    /// iOS `BLEPublicMessagePolicy` / `BLEPublicMessageHandler.handle`: a broadcast message not older than 6 h whose
    /// signature verifies under its sender's key — from the peer list, else an identity met before — is shown
    /// (within the display's per-sender bucket) and kept; any other is dropped.
    mutating func messageIOS(_ packet: MeshPacket, now: UInt64) {
        guard packet.isBroadcast else { return }
        if packet.timestamp + Rules.iOSMessageMaxAgeMs < now { return drop(.staleMessage) }
        let keys = [peers[packet.sender]?.signingKey, remembered[packet.sender]].compactMap { $0 }
        guard keys.contains(where: { packet.verifySignature($0).isValid }) else { return drop(.unverifiedMessage, packet) }
        storeMessage(packet, now: now)
        var bucket = shownBuckets[packet.sender] ?? (Rules.iOSShownBurst, now)
        bucket.tokens = min(Rules.iOSShownBurst, bucket.tokens + Double(now - bucket.at) / 1_000)
        bucket.at = now
        guard bucket.tokens >= 1 else {
            shownBuckets[packet.sender] = bucket
            return drop(.displayRateLimited)
        }
        bucket.tokens -= 1
        shownBuckets[packet.sender] = bucket
        show(packet, name: peers[packet.sender]?.nickname ?? "anon")
    }

    // MARK: Android

    /// Android `PacketProcessor.processPacket`: every packet is handed to its sender's actor from a coroutine of its
    /// own, so packets from one sender within ``Rules/androidReorderWindowMs`` may be handled in either order — the
    /// model handles them newest first.
    mutating func releaseHeld(now: UInt64, into out: inout [MeshAction]) {
        while let first = held.first, first.due <= now {
            let sender = first.packet.sender
            let limit = first.due + Rules.androidReorderWindowMs
            let batch = held.enumerated().filter { $0.element.packet.sender == sender && $0.element.due <= limit }
            for index in batch.map(\.offset).reversed() { held.remove(at: index) }
            for item in batch.reversed() { receiveAndroid(item.element.packet, on: item.element.link, now: now, into: &out) }
        }
    }

    /// Android `SecurityManager.validatePacket` (own packets, LEAVE's ±300 s, dedup — a repeated TTL-7 announce is let
    /// through — and the signature of announces, messages and leaves), then `PacketProcessor`'s dispatch.
    mutating func receiveAndroid(_ packet: MeshPacket, on link: MeshLinkID, now: UInt64, into out: inout [MeshAction]) {
        let sender = packet.sender
        if sender == peerID { return drop(.selfLoopback) }
        if packet.type == .leave, Self.distance(packet.timestamp, now) > 300_000 { return drop(.timestampSkew) }
        let key = "\(packet.timestamp)-\(sender.hex)-\(Hex.encode(SHA256.hash(Array(packet.payload.prefix(64))).prefix(4)))"
        if let at = seen[key], now < at + Rules.androidDedupMs, !(packet.type == .announce && packet.ttl >= 7) { return drop(.duplicate) }
        switch packet.type {
        case .announce:
            // `AnnouncementIdentityValidator.verify`, `MessageHandler.handleAnnounceWithResult`.
            guard let payload = try? AnnouncePayload.decode(packet.payload), MeshPeerID(noisePublicKey: payload.noisePublicKey) == sender,
                  Self.distance(packet.timestamp, now) <= Rules.androidAnnounceSkewMs,
                  let signing = try? Ed25519PublicKey(rawRepresentation: payload.signingPublicKey), packet.verifySignature(signing).isValid,
                  peers[sender].map({ $0.noiseKey == payload.noisePublicKey && $0.signingKey == signing }) ?? true
            else { return drop(.announceRejected, packet) }
            seen[key] = now
            peers[sender] = Peer(nickname: payload.nickname, noiseKey: payload.noisePublicKey, signingKey: signing, lastSeen: now, connected: true)
            // `DirectLinkAnnouncementPolicy.observationFor` + `BluetoothConnectionTracker.observePeerIfCurrent`: TTL 7
            // exactly maps the link to the sender (the last such announce owns it), and a REQUEST_SYNC goes to the sender
            // 1 s later — after every such announce.
            if packet.ttl == MeshPacket.Limits.originTTL {
                if owner(of: link) != sender { report.events.append(.linkOwner(link, sender)) }
                links[link] = .some(sender)
                initialSyncs.append((now + Rules.initialSyncDelayMs, sender))
            }
            // `GossipSyncManager.onPublicPacketSeen`: the last accepted announce per sender, if ≤ 180 s old.
            if now <= packet.timestamp + Rules.androidAnnounceMaxAgeMs { store.announces[sender] = packet }
        case .message, .leave:
            guard let signing = peers[sender]?.signingKey, packet.verifySignature(signing).isValid else { return drop(.unverifiedMessage, packet) }
            seen[key] = now
            peers[sender]?.lastSeen = now
            if packet.type == .leave { return remove(sender, reason: "leave") }
            guard packet.isBroadcast else { return }
            // `PeerManager.addOrUpdatePeer`: every other peer with this nickname idle for 10 s is removed.
            let name = peers[sender]?.nickname ?? ""
            for (id, peer) in peers.sorted(by: { $0.key < $1.key })
            where id != sender && peer.nickname == name && now >= peer.lastSeen + Rules.androidNicknameIdleMs {
                remove(id, reason: "nickname")
            }
            storeMessage(packet, now: now)
            show(packet, name: name)
        case .requestSync:
            seen[key] = now
            peers[sender]?.lastSeen = now
            answer(packet, now: now, into: &out)
        default:
            seen[key] = now
            peers[sender]?.lastSeen = now
        }
    }

    // MARK: Shared

    mutating func drop(_ reason: Drop, _ packet: MeshPacket? = nil) {
        report.drops.add(reason)
        if let packet, report.dropped.count < Report.maxDropped {
            report.dropped.append(Dropped(reason: reason, sender: packet.sender, type: packet.type, ttl: packet.ttl, timestamp: packet.timestamp))
        }
    }

    mutating func show(_ packet: MeshPacket, name: String) {
        let text = String(decoding: packet.payload, as: UTF8.self)
        let stableID = MeshMessageIdentity.stableID(senderHex: packet.sender.hex, timestampMs: packet.timestamp, content: text)
        // Android `AppStateStore.addPublicMessage` and iOS's timeline never show one message twice.
        guard shownIDs.insert(stableID).inserted else { return }
        report.shown.append(Shown(sender: packet.sender, name: name, text: text, stableID: stableID, bySync: packet.ttl == 0))
    }

    static func distance(_ a: UInt64, _ b: UInt64) -> UInt64 { a > b ? a - b : b - a }
}
