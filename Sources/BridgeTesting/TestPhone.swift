public import BitchatWire
public import BotCrypto
import BotSupport
public import Mesh
public import MeshRuntime
import MeshSync
public import Nostr
import Synchronization

/// A phone on the world's radio segments: a mesh peer engine on the site's manual clock, with what it heard kept in
/// ``heard``. It behaves as the apps do where a scenario depends on it, each rule named where it is set:
/// - an iPhone announces every 15 s ± 4 s and forgets a silent peer after 60 s (iOS `TransportConfig`, MESH-WIRE
///   §4.7; the engine's defaults); an Android phone as set in ``App/android``; both announce at once on a new link;
/// - it relays as iOS does (no relay gate: only the bridge judges before relaying, SPAM-FILTER §1);
/// - with ``App/iPhoneWithBoard``, gossip sync and the board as iOS (BOARD.md §8–§9: REQUEST_SYNC rounds, RSR taken);
/// - an iPhone shows a `fromGateway` carrier only on the channel level it views (NOSTR-GEO §9, `GatewayService`) and
///   an Android phone shows no carrier at all (main has no type 0x28, `BinaryProtocol.kt`): see ``shows(_:viewing:)``.
public final class TestPhone: Sendable {
    public enum App: Sendable {
        /// iOS without gossip sync.
        case iPhone
        /// iOS with gossip sync and the board.
        case iPhoneWithBoard
        /// Android main.
        case android
        /// Android main on a low battery: an announce every 300 s (`PowerManager.kt`), otherwise as ``android``.
        case androidLowBattery
    }

    public let name: String
    public let app: App
    public let node: MeshNode
    public let noiseKey: X25519PrivateKey
    public let signingKey: Ed25519PrivateKey
    /// Every action the phone's engine reported, in order.
    public let heard = Recorder<MeshAction>()
    let transport: SegmentTransport
    /// The segments the phone is on.
    public let segments: [Segment]
    let time: any TimeSource
    private let running = Mutex<Task<Void, Never>?>(nil)
    /// With ``App/iPhoneWithBoard``: the app's gossip and board stores and its answers to sync requests.
    private let sync: PhoneSync?
    /// With ``App/iPhoneWithBoard``: every REQUEST_SYNC the phone sent, with the filter of what it held then.
    public var syncRequestsSent: Recorder<SentSyncRequest> { sync?.sent ?? Recorder() }

    public var id: MeshPeerID { MeshPeerID(noisePublicKey: noiseKey.publicKey) }

    init(name: String, app: App, segments: [Segment], time: any TimeSource, seed: UInt64,
         noiseKey: X25519PrivateKey = .generate(), signingKey: Ed25519PrivateKey = .generate()) {
        self.name = name
        self.app = app
        self.noiseKey = noiseKey
        self.signingKey = signingKey
        self.time = time
        self.segments = segments
        transport = SegmentTransport(segments)
        var configuration = MeshPeerEngine.Configuration()
        var capabilities: PeerCapabilities?
        switch app {
        case .iPhone: break
        case .iPhoneWithBoard: configuration.sync = SyncRequester.Configuration()
        case .android, .androidLowBattery:
            // Android main `09b481f1`: capabilities 0x0100 (private media) in its announces, an announce every 30 s
            // (`PowerManager.kt`'s normal cadence; 300 s on a low battery), silent peers kept 180 s.
            capabilities = [.privateMedia]
            configuration.announceIntervalMs = app == .android ? 30_000 : 300_000
            configuration.peerTimeoutMs = 180_000
        }
        let identity = MeshIdentity(noisePublicKey: noiseKey.publicKey, signingKey: signingKey, nickname: name, capabilities: capabilities)
        let node = MeshNode(engine: MeshPeerEngine(identity: identity, configuration: configuration), transport: transport, clock: time, seed: seed)
        self.node = node
        sync = configuration.sync == nil ? nil : PhoneSync()
    }

    /// Joins the air: the node takes its link-ups now (its announce goes out on each), so nothing said right after is
    /// lost to a link it has not seen yet; the transport's own link-up events follow (a repeat changes nothing but
    /// an announce), then it runs.
    func start() async {
        for (link, mtu, kind) in transport.links { await node.submit(.linkUp(link, mtu: mtu, kind: kind)) }
        let node = node, heard = heard, sync = sync, time = time
        running.withLock { running in
            running = Task {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await node.run() }
                    group.addTask {
                        for await action in node.actions {
                            let inputs = sync?.handle(action, now: time.nowMs()) ?? []
                            for input in inputs { await node.submit(input) }
                            heard.append(action)
                        }
                    }
                }
            }
        }
    }

    /// Returns once the phone's node has taken every frame that reached it (a flood relayed to it drained).
    public func drained() async { await transport.events.drained() }

    /// Leaves the air: its links go down; the node ends.
    public func leave() async {
        transport.close()
        await running.withLock { $0 }?.value
    }

    /// Says `text` in the public chat (a signed broadcast message); returns its stable message ID (what the bridge's
    /// verdicts and moderation log name it by).
    @discardableResult
    public func say(_ text: String) async -> String {
        let timestamp = await node.submit(.sendPublicMessage(text))
        return MeshMessageIdentity.stableID(senderHex: id.hex, timestampMs: timestamp, content: text)
    }

    /// Whether the phone has verified `peer`'s announce (waits for it, bounded).
    public func knows(_ peer: MeshPeerID, within seconds: Double = 20) async -> Bool {
        if await node.peers[peer] != nil { return true }
        return await heard.first(within: seconds) { if case .peerVerified(let p) = $0 { p.id == peer } else { false } } != nil
    }

    /// Whether the phone and `bridge` verified each other's announces: wait on it before advancing to a round that
    /// needs both (gossip sync answers only direct peers that verified).
    public func meets(_ bridge: TestBridge, within seconds: Double = 20) async -> Bool {
        let bridgeID = await bridge.peerID
        guard await knows(bridgeID, within: seconds) else { return false }
        return await bridge.knows(id, within: seconds)
    }

    /// What a mesh-only phone does with no internet (NOSTR-GEO §8.1, §9): a chat event signed by its key for
    /// `geohash` (mined to 8 bits, as iOS mines chat), carried `toGateway` (or `toBridge` for a rendezvous `cell`)
    /// in a packet signed by the phone and directed to `bridge`. Returns the event.
    @discardableResult
    public func deposit(
        _ text: String, geohash: String, to bridge: MeshPeerID, rendezvous: Bool = false, nostrSeed: [UInt8] = SecureRandom.bytes(32)
    ) async throws -> NostrEvent {
        let label = rendezvous ? NostrKeyDerivation.rendezvousLabel(cell: geohash) : NostrKeyDerivation.channelLabel(geohash: geohash)
        let key = try NostrKeyDerivation.secretKey(seed: nostrSeed, label: label)
        var tags = [[rendezvous ? "r" : "g", geohash], ["n", name]]
        if rendezvous {
            let timestamp = await node.submit(.sendPublicMessage(text))
            tags.append(["m", MeshMessageIdentity.stableID(senderHex: id.hex, timestampMs: timestamp, content: text), id.hex, String(timestamp)])
        }
        let now = Int64(time.nowMs() / 1000)
        var unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: now, kind: NostrKind.ephemeralChat, tags: tags, content: text)
        if !rendezvous { unsigned = try NostrPoW.mine(unsigned, target: 8).event }
        let event = try unsigned.signed(with: key)
        let payload = try NostrCarrierPayload(
            direction: rendezvous ? .toBridge : .toGateway, geohash: geohash, eventJSON: event.jsonBytes).encode()
        await node.submit(.originate(MeshPacket(type: .nostrCarrier, timestamp: 0, sender: id, recipient: bridge, payload: payload), sign: true))
        return event
    }

    /// What a phone does with a private message no transport can deliver now (COURIER.md §2.2, iOS
    /// `MessageRouter.attemptCourierDeposit`): the sealed envelope handed to a connected courier as a directed 0x04,
    /// TTL 7, signed by the phone.
    public func depositCourier(_ envelope: [UInt8], to courier: MeshPeerID) async {
        await node.submit(.originate(MeshPacket(type: .courierEnvelope, timestamp: 0, sender: id, recipient: courier, payload: envelope), sign: true))
    }

    /// The courier envelopes handed to this phone (directed 0x04s its engine verified), with their sender.
    public var courierMail: [(from: MeshPeerID, envelope: [UInt8])] {
        heard.all.compactMap { if case .courierDeposit(let from, let envelope) = $0 { (from, envelope) } else { nil } }
    }

    /// Whether `envelope` was handed to this phone by `sender`, waiting up to `seconds` for it.
    public func gotCourierMail(_ envelope: [UInt8], from sender: MeshPeerID, within seconds: Double = 20) async -> Bool {
        await heard.first(within: seconds) { action in
            if case .courierDeposit(let from, let bytes) = action { return from == sender && bytes == envelope }
            return false
        } != nil
    }

    /// Posts on the bulletin board (BOARD.md §4–§5): a post signed by the phone's announce key (as iOS signs posts),
    /// in a 0x23 packet the phone signs too (MESH-WIRE §4.4). Returns the post.
    @discardableResult
    public func postOnBoard(_ text: String, geohash: String = "u4pruy", lifetimeMs: UInt64 = 3_600_000, urgent: Bool = false) async throws -> BoardPost {
        let now = time.nowMs()
        let post = try BoardPost.signed(
            postID: Array(SHA256.hash(Array("\(id.hex) \(now) \(text)".utf8)).prefix(16)), geohash: geohash, content: text, nickname: name,
            createdAt: now, expiresAt: now + lifetimeMs, flags: urgent ? BoardPost.urgentFlag : 0, key: signingKey)
        await node.submit(.originate(MeshPacket(type: .boardPost, timestamp: 0, sender: id, payload: BoardPayload.post(post).encode()), sign: true))
        return post
    }

    /// Deletes one of its board posts: a signed tombstone (BOARD.md §5). Returns its payload.
    @discardableResult
    public func deleteFromBoard(_ post: BoardPost) async throws -> [UInt8] {
        let tombstone = try BoardTombstone.signed(postID: post.postID, deletedAt: time.nowMs(), key: signingKey)
        let payload = BoardPayload.tombstone(tombstone).encode()
        await node.submit(.originate(MeshPacket(type: .boardPost, timestamp: 0, sender: id, payload: payload), sign: true))
        return payload
    }

    /// The board packets the phone heard: (payload, TTL, whether it came as a sync reply).
    public var boardPackets: [(payload: [UInt8], ttl: UInt8, rsr: Bool)] {
        heard.all.compactMap { action in
            switch action {
            case .boardPacket(let packet, _), .boardHeard(let packet): (packet.payload, packet.ttl, packet.isRSR)
            default: nil
            }
        }
    }

    /// Whether the phone heard a board packet with `payload` (by sync: as a sync reply; else live), waiting for it.
    public func heardBoard(_ payload: [UInt8], bySync: Bool = false, within seconds: Double = 20) async -> Bool {
        await heard.first(within: seconds) { action in
            switch action {
            case .boardPacket(let packet, _), .boardHeard(let packet): packet.payload == payload && packet.isRSR == bySync
            default: false
            }
        } != nil
    }

    /// The carriers the phone heard for `eventID`.
    public func carriers(of eventID: EventID) -> [MeshCarrier] {
        heard.all.compactMap { action -> MeshCarrier? in
            guard case .carrier(let carrier) = action, Self.eventID(of: carrier) == eventID else { return nil }
            return carrier
        }
    }

    /// Waits for a carrier of `eventID` (bounded).
    @discardableResult
    public func carrier(of eventID: EventID, within seconds: Double = 20) async -> MeshCarrier? {
        guard case .carrier(let carrier)? = await heard.first(within: seconds, where: { action in
            if case .carrier(let carrier) = action { return Self.eventID(of: carrier) == eventID }
            return false
        }) else { return nil }
        return carrier
    }

    /// Waits for the public message `stableID` (relayed to this phone); nil if it did not come.
    public func message(_ stableID: String, within seconds: Double = 20) async -> MeshPublicMessage? {
        guard case .publicMessage(let message)? = await heard.first(within: seconds, where: { action in
            if case .publicMessage(let message) = action { return message.stableID == stableID }
            return false
        }) else { return nil }
        return message
    }

    /// Whether every one of `stableIDs`, `texts` and `eventIDs` reached the phone (a public message by ID or by text, a
    /// carrier), each waited for at most `seconds`: the condition of a ``Site/advance(until:limit:step:)`` for what a
    /// bridge sends once a verdict or a schedule released it — time must keep moving until it went out.
    public func heard(
        messages stableIDs: [String] = [], texts: [String] = [], carriers eventIDs: [EventID] = [], within seconds: Double = 0.05
    ) async -> Bool {
        for id in stableIDs where await message(id, within: seconds) == nil { return false }
        for text in texts where await heard.first(within: seconds, where: { action in
            if case .publicMessage(let message) = action { message.text == text } else { false }
        }) == nil { return false }
        for id in eventIDs where await carrier(of: id, within: seconds) == nil { return false }
        return true
    }

    /// How many times the phone heard the public message `stableID`.
    public func count(of stableID: String) -> Int {
        heard.count { if case .publicMessage(let message) = $0 { message.stableID == stableID } else { false } }
    }

    /// The public messages the phone heard with `text`.
    public func messages(_ text: String) -> [MeshPublicMessage] {
        heard.all.compactMap { if case .publicMessage(let m) = $0, m.text == text { m } else { nil } }
    }

    /// Whether this phone's app shows `carrier` to its user when viewing the channel `level`: an iPhone shows a
    /// `fromGateway` carrier only on the level it views and every `fromBridge` one; Android main shows none.
    public func shows(_ carrier: MeshCarrier, viewing level: String) -> Bool {
        switch app {
        case .android, .androidLowBattery: false
        case .iPhone, .iPhoneWithBoard:
            carrier.payload.direction == .fromBridge || (carrier.payload.direction == .fromGateway && carrier.payload.geohash == level)
        }
    }

    static func eventID(of carrier: MeshCarrier) -> EventID? {
        (try? UnverifiedEvent(json: String(decoding: carrier.payload.eventJSON, as: UTF8.self)))?.claimedID
    }
}

/// A REQUEST_SYNC a test phone sent: to whom, and the payload (its GCS filter of what the phone held).
public struct SentSyncRequest: Sendable {
    public let peer: MeshPeerID
    public let payload: RequestSyncPayload
}

/// The iOS app's side of gossip sync and the board, as the engine leaves it to its owner (BOARD.md §7–§9, iOS
/// `GossipSyncManager`): every verified packet the engine offers is kept, a due round asks with a filter of what is
/// kept, a request is answered from the same stores (iOS's per-peer rate limit and airtime budget: the responder's
/// defaults), and a board packet is kept and relayed only when the store accepted it.
final class PhoneSync: Sendable {
    private let state = Mutex((stores: SyncStores(), responder: SyncResponder()))
    let sent = Recorder<SentSyncRequest>()

    func handle(_ action: MeshAction, now: UInt64) -> [MeshInput] {
        let inputs = state.withLock { state in Self.handle(action, now: now, stores: &state.stores, responder: &state.responder) }
        for case .sendSyncRequest(let peer, let payload) in inputs { sent.append(SentSyncRequest(peer: peer, payload: payload)) }
        return inputs
    }

    private static func handle(_ action: MeshAction, now: UInt64, stores: inout SyncStores, responder: inout SyncResponder) -> [MeshInput] {
        switch action {
        case .syncStore(let packet), .originated(let packet):
            // iOS keeps its own sends too (`onPublicPacketSeen` after `sendMessage` / `sendAnnounceNow`).
            if let stored = try? SyncPacket(packet) { _ = stores.record(stored, now: now) }
            return []
        case .syncRoundDue(let round):
            return [.sendSyncRequest(peer: round.peer, payload: SyncRequester.payload(types: round.types, from: stores, now: now))]
        case .syncRequest(let link, let input):
            let answer = responder.answer(input, from: &stores, now: now)
            return answer.frames.isEmpty ? [] : [.sendSyncReplies(link: link, frames: answer.frames)]
        case .boardPacket(let packet, let link):
            guard let stored = try? SyncPacket(packet), case .accepted = stores.ingest(stored, now: now).outcome else { return [] }
            return [.relayBoard(packet, from: link)]
        default:
            return []
        }
    }
}
