public import BitchatWire
public import BotCrypto
public import BotSupport
public import Mesh
import MeshSync

/// A phone as the bitchat apps' own code treats what a bridge sends — not as our codec does: the link-binding rule,
/// the ingress guard's checks on sync requests and sync replies, the peer list and its timeouts, the gossip store
/// that serves back whatever a request's filter lacks, the drop of messages whose sender it cannot verify, and what
/// the user is shown. A pure ``MeshMachine`` (run by `MeshNodeOf` over any transport, in-process or a radio hub).
///
/// Written from the app source (`permissionlesstech/bitchat` at `9b84b361`, `bitchat-android` at `09b481f1`;
/// `../shared/spec/APP-BEHAVIOUR.md`); every rule cites the file and function it comes from. Both apps' rules are
/// kept side by side: ``App/iOS`` and ``App/android``.
///
/// Left out on purpose (a test phone alone with the bridge on one link does not need them, and each is said so):
/// relaying (the model never relays), fragments, files, Noise and private messages, the board, iOS's 3 s per-link
/// ingress records and its announce "afterglow" (a second own announce 0.3–0.6 s after a new peer).
public struct AppPhoneModel: MeshMachine, Sendable {
    public enum App: String, Sendable {
        /// iOS `9b84b361`.
        case iOS = "ios"
        /// Android `09b481f1`.
        case android
    }

    /// The apps' constants used here, each with where it is set.
    public enum Rules {
        /// iOS `TransportConfig.bleLinkRebindCooldownSeconds`: at most one peer-ID rotation per link per 60 s.
        public static let iOSRebindCooldownMs: UInt64 = 60_000
        /// iOS `BLEIngressPacketGuard`: live packets more than 120 s off the phone's clock are dropped.
        public static let iOSMaxSkewMs: UInt64 = 120_000
        /// iOS `RequestSyncManager`: a sync reply (RSR) is taken within 30 s of a REQUEST_SYNC to the link's peer.
        public static let iOSReplyWindowMs: UInt64 = 30_000
        /// iOS `BLEAnnouncePreflightPolicy`: announces older than 900 s are refused.
        public static let iOSAnnounceMaxAgeMs: UInt64 = 900_000
        /// iOS `TransportConfig.syncStalePeerTimeoutSeconds`: a stored announce older than 60 s takes its sender's
        /// messages with it (`GossipSyncManager.removeState`).
        public static let iOSStaleAnnounceMs: UInt64 = 60_000
        /// iOS `TransportConfig.syncPublicMessageMaxAgeSeconds` (6 h) and `syncSeenCapacity` (1,000).
        public static let iOSMessageMaxAgeMs: UInt64 = 6 * 3_600_000
        public static let iOSMessageCapacity = 1_000
        /// iOS `TransportConfig.blePeerInactivityTimeoutSeconds` / `bleReachabilityRetentionVerifiedSeconds`.
        public static let iOSDisconnectAfterMs: UInt64 = 8_000
        public static let iOSForgetAfterMs: UInt64 = 60_000
        /// iOS `TransportConfig.bleMaintenanceInterval`.
        public static let iOSMaintenanceMs: UInt64 = 5_000
        /// iOS `GossipSyncManager`: the maintenance tick and its periodic rounds.
        public static let iOSSyncTickMs: UInt64 = 30_000
        /// iOS `TransportConfig.syncResponseRateLimitMaxResponses` / `WindowSeconds`.
        public static let iOSMaxAnswersPerWindow = 8
        public static let iOSAnswerWindowMs: UInt64 = 30_000
        /// iOS `TransportConfig.messageDedupMaxAgeSeconds`.
        public static let iOSDedupMs: UInt64 = 300_000
        /// iOS `ChatPublicConversationCoordinator`: per-sender display bucket (5, +1 per second).
        public static let iOSShownBurst = 5.0
        /// iOS announces every 15 ± 4 s with 1–5 connected peers (`bleConnectedAnnounceBaseSecondsSparse`).
        public static let iOSAnnounceMs: UInt64 = 15_000
        public static let iOSAnnounceJitterMs: UInt64 = 4_000
        /// Android `AppConstants.Mesh.STALE_PEER_TIMEOUT_MS`, checked every `PEER_CLEANUP_INTERVAL_MS`.
        public static let androidStalePeerMs: UInt64 = 180_000
        public static let androidCleanupMs: UInt64 = 60_000
        /// Android `GossipSyncManager`: announces kept 180 s after their own timestamp, 500 messages.
        public static let androidAnnounceMaxAgeMs: UInt64 = 180_000
        public static let androidMessageCapacity = 500
        /// Android `MessageHandler.ANNOUNCE_CLOCK_SKEW_TOLERANCE_MS`.
        public static let androidAnnounceSkewMs: UInt64 = 600_000
        /// Android `SecurityManager.MESSAGE_TIMEOUT_MS` (dedup window).
        public static let androidDedupMs: UInt64 = 300_000
        /// Android `PeerManager.addOrUpdatePeer`: a message removes other peers of its nickname idle this long.
        public static let androidNicknameIdleMs: UInt64 = 10_000
        /// Android `PacketProcessor.processPacket` launches a coroutine per packet before its sender's actor, so
        /// packets from one sender this close together may be handled in either order; the model takes the worse.
        public static let androidReorderWindowMs: UInt64 = 50
        /// Android's foreground announce period (`PowerManager`) and periodic sync (`GossipSyncManager.start`).
        public static let androidAnnounceMs: UInt64 = 30_000
        public static let androidSyncMs: UInt64 = 30_000
        /// Both apps ask a new direct peer 1 s after its announce (iOS `scheduleInitialSyncToPeer(_, 1.0)`,
        /// Android `scheduleInitialSyncToPeer(_, 1_000)`).
        public static let initialSyncDelayMs: UInt64 = 1_000
    }

    /// A verified peer in the phone's list.
    public struct Peer: Sendable, Equatable {
        public var nickname: String
        public var noiseKey: [UInt8]
        public var signingKey: Ed25519PublicKey
        public var lastSeen: UInt64
        /// iOS `BLEPeerRegistry`'s `isConnected`.
        public var connected: Bool
    }

    /// A public message the user sees.
    public struct Shown: Sendable, Equatable {
        public var sender: MeshPeerID
        /// The name shown (the sender's announced nickname when the message was handled).
        public var name: String
        public var text: String
        public var stableID: String
        public var bySync: Bool
    }

    /// A packet the phone sent back in answer to a REQUEST_SYNC.
    public struct Reply: Sendable, Equatable {
        public var requester: MeshPeerID
        public var sender: MeshPeerID
        public var type: MessageType
    }

    /// Something the phone's user or its peer list would notice.
    public enum Event: Sendable, Equatable {
        /// iOS `.peerConnected` (a direct announce from a new or disconnected peer).
        case connected(MeshPeerID)
        /// iOS `.peerDisconnected` (inactivity, or retired after a rotation).
        case disconnected(MeshPeerID)
        /// The link now belongs to `peer` (iOS: bound or rebound; Android: `addressPeerMap` changed).
        case linkOwner(MeshLinkID, MeshPeerID)
        /// The peer left the list (timeout, rotation, leave, Android's nickname rule).
        case removed(MeshPeerID, String)
    }

    /// Why the phone dropped something, named after the app's own reason where it has one.
    public enum Drop: String, CounterKey, CaseIterable {
        case undecodable
        case selfLoopback = "self_loopback"
        /// iOS `BLEIngressPacketGuard`: a REQUEST_SYNC from another ID than the link's bound one.
        case directSenderMismatch = "direct_sender_mismatch"
        /// iOS `BLEIngressPacketGuard`: an RSR packet without a REQUEST_SYNC to the link's peer in the last 30 s.
        case invalidRSR = "invalid_rsr"
        case timestampSkew = "timestamp_skew"
        case duplicate
        case announceRejected = "announce_rejected"
        /// A public message whose sender has no key the phone knows (or whose signature fails under it).
        case unverifiedMessage = "unverified_message"
        /// iOS: a broadcast message older than 6 h.
        case staleMessage = "stale_message"
        /// iOS: the display's per-sender bucket was empty (shown later lines only).
        case displayRateLimited = "display_rate_limited"
        case requestRejected = "request_rejected"
        case requestRateLimited = "request_rate_limited"
        /// Android `sendPacketToPeer`: the requester owns no live link, so its replies (or a targeted request)
        /// go nowhere.
        case unroutable
    }

    /// A dropped packet, for a test's message when it should not have been.
    public struct Dropped: Sendable, Equatable {
        public var reason: Drop
        public var sender: MeshPeerID
        public var type: MessageType
        public var ttl: UInt8
        public var timestamp: UInt64
    }

    /// Everything a test reads.
    public struct Report: Sendable {
        /// ``dropped`` keeps the first this many.
        public static let maxDropped = 64
        public var shown: [Shown] = []
        /// The packets behind the first unverified-message and refused-announce drops.
        public var dropped: [Dropped] = []
        public var events: [Event] = []
        public var drops = Tally<Drop>()
        public var replies: [Reply] = []
        /// REQUEST_SYNCs answered, by requester.
        public var answered: [MeshPeerID: Int] = [:]
        /// REQUEST_SYNCs sent (nil: broadcast).
        public var requestsSent: [(to: MeshPeerID?, types: SyncTypes)] = []
    }

    public let app: App
    public let peerID: MeshPeerID
    public let nickname: String
    let noiseKey: [UInt8]
    let signingKey: Ed25519PrivateKey
    public internal(set) var report = Report()
    /// The live links and who owns each (iOS `BLELinkBindings`, Android `addressPeerMap`).
    public internal(set) var links: [MeshLinkID: MeshPeerID?] = [:]
    var mtus: [MeshLinkID: Int] = [:]
    var lastRebind: [MeshLinkID: UInt64] = [:]
    public internal(set) var peers: [MeshPeerID: Peer] = [:]
    /// iOS: every identity it ever verified (the keychain), a message's second chance (`signedSenderDisplayName`).
    var remembered: [MeshPeerID: Ed25519PublicKey] = [:]
    var seen: [String: UInt64] = [:]
    var store = GossipStore()
    var requestsTo: [MeshPeerID: UInt64] = [:]
    var answers: [MeshPeerID: [UInt64]] = [:]
    var announcedBack: [MeshPeerID: UInt64] = [:]
    var shownBuckets: [MeshPeerID: (tokens: Double, at: UInt64)] = [:]
    var shownIDs: Set<String> = []
    /// Android: packets waiting out the reorder window, in arrival order.
    var held: [(due: UInt64, link: MeshLinkID, packet: MeshPacket)] = []
    var initialSyncs: [(due: UInt64, peer: MeshPeerID)] = []
    var nextAnnounce: UInt64 = .max
    var nextSyncTick: UInt64
    var nextMaintenance: UInt64
    var syncTicks = 0

    public init(app: App, nickname: String, noiseKey: X25519PrivateKey, signingKey: Ed25519PrivateKey, start: UInt64) {
        self.app = app
        self.nickname = nickname
        self.noiseKey = noiseKey.publicKey
        self.signingKey = signingKey
        self.peerID = MeshPeerID(noisePublicKey: noiseKey.publicKey)
        nextSyncTick = start + (app == .iOS ? Rules.iOSSyncTickMs : Rules.androidSyncMs)
        nextMaintenance = start + (app == .iOS ? Rules.iOSMaintenanceMs : Rules.androidCleanupMs)
    }

    public var livePeers: [MeshPeer] {
        peers.map { id, peer in
            MeshPeer(id: id, nickname: peer.nickname, noisePublicKey: peer.noiseKey, signingPublicKey: peer.signingKey,
                     capabilities: nil, bridgeGeohash: nil, lastSeen: peer.lastSeen, isDirect: links.values.contains(id))
        }
    }

    /// Who owns `link` now.
    public func owner(of link: MeshLinkID) -> MeshPeerID? { links[link] ?? nil }

    public func nextDeadline() -> UInt64? {
        var next = min(nextSyncTick, nextMaintenance)
        if !links.isEmpty { next = min(next, nextAnnounce) }
        if let first = held.first { next = min(next, first.due) }
        if let initial = initialSyncs.map(\.due).min() { next = min(next, initial) }
        return next
    }

    public mutating func handle<R: RandomNumberGenerator>(_ input: MeshInput, now: UInt64, random: inout R) -> [MeshAction] {
        var out: [MeshAction] = []
        switch input {
        case .linkUp(let link, let mtu, _):
            links[link] = .some(nil)
            mtus[link] = mtu
            // Both apps announce on a new connection (iOS on connect, Android 200 ms after the GATT connect).
            announce(now: now, on: [link], into: &out)
            if nextAnnounce == .max { scheduleAnnounce(now: now, random: &random) }
        case .linkDown(let link):
            links[link] = nil
            mtus[link] = nil
        case .frame(let link, let frame):
            guard links[link] != nil else { break }
            guard let packet = try? MeshPacket.decode(frame) else {
                report.drops.add(.undecodable)
                break
            }
            if app == .android {
                held.append((now + Rules.androidReorderWindowMs, link, packet))
            } else {
                receiveIOS(packet, on: link, now: now, into: &out)
            }
        case .sendPublicMessage(let text):
            let packet = signed(MeshPacket(type: .message, timestamp: now, sender: peerID, payload: Array(text.utf8)))
            // Both apps keep their own sends for sync (iOS `sendMessage` → `onPublicPacketSeen`, Android `sendMessage`).
            storeMessage(packet, now: now)
            send(packet, on: Array(links.keys), into: &out)
        case .tick:
            tick(now: now, random: &random, into: &out)
        default:
            break
        }
        return out
    }

    // MARK: Time

    mutating func tick<R: RandomNumberGenerator>(now: UInt64, random: inout R, into out: inout [MeshAction]) {
        releaseHeld(now: now, into: &out)
        let due = initialSyncs.filter { $0.due <= now }
        initialSyncs.removeAll { $0.due <= now }
        for item in due { initialSync(to: item.peer, now: now, into: &out) }
        if now >= nextAnnounce {
            announce(now: now, on: Array(links.keys), into: &out)
            scheduleAnnounce(now: now, random: &random)
        }
        if now >= nextMaintenance {
            app == .iOS ? maintainIOS(now: now, into: &out) : maintainAndroid(now: now)
            nextMaintenance = now + (app == .iOS ? Rules.iOSMaintenanceMs : Rules.androidCleanupMs)
        }
        if now >= nextSyncTick {
            syncTick(now: now, into: &out)
            nextSyncTick = now + (app == .iOS ? Rules.iOSSyncTickMs : Rules.androidSyncMs)
        }
    }

    mutating func scheduleAnnounce<R: RandomNumberGenerator>(now: UInt64, random: inout R) {
        switch app {
        case .iOS:
            nextAnnounce = now + Rules.iOSAnnounceMs - Rules.iOSAnnounceJitterMs
                + UInt64.random(in: 0...(2 * Rules.iOSAnnounceJitterMs), using: &random)
        case .android:
            nextAnnounce = now + Rules.androidAnnounceMs
        }
    }

    /// iOS `BLEPeerRegistry.reconcileConnectivity` (every 5 s): a connected peer with no bound live link and nothing
    /// heard for 8 s is disconnected; a disconnected one silent for 60 s is removed with its gossip state.
    mutating func maintainIOS(now: UInt64, into out: inout [MeshAction]) {
        for (id, peer) in peers.sorted(by: { $0.key < $1.key }) {
            if peer.connected, !links.values.contains(id), now > peer.lastSeen + Rules.iOSDisconnectAfterMs {
                peers[id]?.connected = false
                report.events.append(.disconnected(id))
            } else if !peer.connected, now > peer.lastSeen + Rules.iOSForgetAfterMs {
                remove(id, reason: "timeout")
            }
        }
    }

    /// Android `PeerManager.cleanupStalePeers` and `GossipSyncManager.pruneStaleAnnouncements` (each every 60 s):
    /// peers silent for 180 s go, and so does every stored announce 180 s past its own timestamp, with its
    /// sender's messages.
    mutating func maintainAndroid(now: UInt64) {
        for (id, peer) in peers.sorted(by: { $0.key < $1.key }) where now > peer.lastSeen + Rules.androidStalePeerMs {
            remove(id, reason: "stale")
        }
        for (sender, announce) in store.announces where now > announce.timestamp + Rules.androidAnnounceMaxAgeMs {
            store.removeState(sender)
        }
    }

    /// Out of the peer list with its gossip state (iOS `retireRotatedPeer`/registry removal → `removeState`;
    /// Android `removePeer` → `onPeerRemoved`).
    mutating func remove(_ id: MeshPeerID, reason: String) {
        guard peers.removeValue(forKey: id) != nil else { return }
        store.removeState(id)
        report.events.append(.removed(id, reason))
    }

    // MARK: Sending

    func signed(_ packet: MeshPacket) -> MeshPacket { (try? packet.signed(with: signingKey)) ?? packet }

    mutating func send(_ packet: MeshPacket, on targets: [MeshLinkID], into out: inout [MeshAction]) {
        guard let frame = try? packet.encode() else { return }
        for link in targets.sorted() where frame.count <= mtus[link] ?? 0 {
            out.append(.transmit(link: link, frame: frame, delayMs: 0))
        }
    }

    /// The phone's own announce: TTL 7, its capabilities (iOS advertises `29 03`, Android `00 01`), kept in its own
    /// store (iOS `sendAnnounceNow`, Android `sendBroadcastAnnounce`).
    mutating func announce(now: UInt64, on targets: [MeshLinkID], into out: inout [MeshAction]) {
        let capabilities = PeerCapabilities(rawValue: app == .iOS ? 0x0329 : 0x0100)
        guard let payload = try? AnnouncePayload(
            nickname: nickname, noisePublicKey: noiseKey, signingPublicKey: signingKey.publicKey.rawRepresentation,
            capabilities: capabilities).encode()
        else { return }
        let packet = signed(MeshPacket(type: .announce, timestamp: now, sender: peerID, payload: payload))
        store.announces[peerID] = packet
        send(packet, on: targets, into: &out)
    }
}
