import BitchatWire
import BotCrypto
import BotStorage
import BotSupport
import Bridge
import Foundation
import Geohash
import IdentityCache
import Mesh
import MeshRuntime
import MeshSync
import MeshSyncStorage
import ModerationLog
import Nostr
import SpamFilter
import Synchronization
import Testing
import Identity
import Moderation
import BridgeCore
import BridgeTesting

/// The coordinator in-process (issue 15): in-memory stores, an ``InProcessAir`` radio segment, a recording
/// relay client. What the process-level end-to-end tests prove with real processes, these prove at the
/// coordinator's own boundary — hidden messages reach the moderation-log store, a store that fails does
/// not stop the bridging, the leave is the last thing the mesh gets at shutdown.
/// Time bounds are generous on purpose: in a full parallel run on 2 cores, long synchronous suites can hold the
/// cooperative threads for tens of seconds; every wait still ends by itself.
extension Recorder {
    /// Whether an item matching `match` was reported or comes within `seconds`.
    func waitFor(within seconds: Double = 60, _ match: @escaping @Sendable (Item) -> Bool) async -> Bool {
        await first(within: seconds, where: match) != nil
    }
}

@Suite("Bridge coordinator in-process", .timeLimit(.minutes(3)))
struct CoordinatorTests {
    static let geohash = "u4pruy"

    /// What the relay pool would report, fed by hand.
    final class Intake: Sendable {
        let stream: AsyncStream<BridgeRelayInput>
        private let continuation: AsyncStream<BridgeRelayInput>.Continuation
        init() { (stream, continuation) = AsyncStream.makeStream(of: BridgeRelayInput.self) }
        func yield(_ input: BridgeRelayInput) { continuation.yield(input) }
    }

    final class RecordingRelays: BridgeRelayClient, Sendable {
        let published = Mutex<[NostrEvent]>([])
        func publish(_ event: NostrEvent) { published.withLock { $0.append(event) } }
        let priorityAuthors = Recorder<Set<String>>()
        func setPriorityAuthors(_ authors: Set<String>) { priorityAuthors.append(authors) }
    }

    final class MemoryRecent: RecentEventRecording {
        var rows: [([UInt8], RecentEventStore.Role)] = []
        var failWith: SQLiteError?
        func record(_ id: [UInt8], as role: RecentEventStore.Role) throws(SQLiteError) {
            if let failWith { throw failWith }
            rows.append((id, role))
        }
        func record(_ ids: [[UInt8]], as role: RecentEventStore.Role) throws(SQLiteError) {
            for id in ids { try record(id, as: role) }
        }
    }

    final class MemoryModerationLog: ModerationRecording {
        let records = Recorder<ModerationRecord>()
        func append(_ record: ModerationRecord) throws(ModerationLogError) -> Int64 {
            records.append(record)
            return Int64(records.all.count)
        }
        func prune(now: Double) throws(ModerationLogError) -> Int { 0 }
        func count() throws(ModerationLogError) -> Int { records.all.count }
        let released = Recorder<(id: String, by: String)>()
        func markReleased(messageID: String, at: Double, by: String) throws(ModerationLogError) -> Int {
            released.append((messageID, by))
            return 1
        }
    }

    final class MemoryUplinks: PendingUplinkStoring {
        var rows: [NostrEvent] = []
        var counters = UplinkStore.Counters()
        func count() throws(SQLiteError) -> Int { rows.count }
        func save(_ event: NostrEvent) throws(SQLiteError) -> Int {
            rows.append(event)
            return 0
        }
        func remove(_ id: EventID) throws(SQLiteError) -> Bool {
            let before = rows.count
            rows.removeAll { $0.id == id }
            return rows.count < before
        }
        func pending(now: Int64) throws(SQLiteError) -> [NostrEvent] { rows }
    }

    /// A bridge (gateway role) and a phone on one in-process segment.
    struct World {
        let air = InProcessAir()
        let keys = BridgeKeys.generate()
        let relays = RecordingRelays()
        let recent = MemoryRecent()
        let moderation = MemoryModerationLog()
        let uplinks = MemoryUplinks()
        let identities: PeerIdentityCache
        let sink = RecordingLogSink()
        let coordinator: BridgeCoordinator
        let bridgeNode: MeshNode
        let phone: MeshNode
        let intake = Intake()
        /// Everything the phone's node reported.
        let seen = Recorder<MeshAction>()
        /// With `sync`: the bridge's gossip sync table (SQLite in memory).
        let syncDatabase: SQLiteDatabase?
        let syncJournal: SQLiteSyncJournal?
        /// What the sync table holds (read only after ``run(_:)``).
        var syncStore: SQLiteSyncStore? {
            syncDatabase.flatMap { try? SQLiteSyncStore(database: $0, now: UInt64(Date().timeIntervalSince1970 * 1000)) }
        }

        /// - Parameter database: an SQLite connection for the stranger cache and the external-change probe
        ///   (as the bridge has); nil keeps the cache in memory.
        init(
            spam: SpamFilterConfig = SpamFilterConfig(), blocked: Set<IdentityKey> = [], allowed: Set<IdentityKey> = [], database: SQLiteDatabase? = nil, sync: Bool = false,
            phoneKey: X25519PrivateKey = .generate(), phoneSigning: Ed25519PrivateKey = .generate(),
            fleet: FleetSettings? = nil, boardLedger: (any BoardNostrLedgering)? = nil, phoneSync: Bool = false,
            fleetList: (any FleetListKeeping)? = nil
        ) throws {
            syncDatabase = sync ? try SQLiteDatabase(path: ":memory:") : nil
            syncJournal = try syncDatabase.map { try SQLiteSyncJournal(database: $0) }
            let store: any IdentityStore = try database.map { try SQLiteIdentityStore(database: $0) } ?? InMemoryIdentityStore()
            identities = PeerIdentityCache(store: store, logger: Logger(label: "t", level: .error))
            let channel = try GeohashCell(CoordinatorTests.geohash)
            var identity = MeshIdentity(
                noisePublicKey: keys.noiseKey.publicKey, signingKey: keys.signingKey, nickname: "bridge",
                capabilities: [.gateway])
            identity.nickname = "bridge"
            var configuration = MeshPeerEngine.Configuration()
            configuration.gatePublicRelays = true
            if sync { configuration.sync = SyncRequester.Configuration() }
            bridgeNode = MeshNode(
                engine: MeshPeerEngine(identity: identity, configuration: configuration), transport: air.join(),
                wallClock: { UInt64(Date().timeIntervalSince1970 * 1000) }, seed: 1)
            // `phoneSync`: the phone hands board packets to its owner (iOS `BoardManager`), as the bridge does.
            var phoneConfiguration = MeshPeerEngine.Configuration()
            if phoneSync { phoneConfiguration.sync = SyncRequester.Configuration() }
            phone = MeshNode(
                engine: MeshPeerEngine(identity: MeshIdentity(
                    noisePublicKey: phoneKey.publicKey, signingKey: phoneSigning, nickname: "phone"), configuration: phoneConfiguration),
                transport: air.join(), wallClock: { UInt64(Date().timeIntervalSince1970 * 1000) }, seed: 2)
            var judge = BridgeJudge(settings: .init(channel: CoordinatorTests.geohash), policy: AdmissionPolicy(config: spam))
            judge.setBlocked(blocked)
            let channelKey = try keys.channelKey(geohash: CoordinatorTests.geohash)
            let router = BridgeRouter(
                settings: .init(channel: channel, rendezvousCell: nil), ownKeys: [channelKey.publicKey], rendezvousKey: nil,
                judge: judge, clockOrigin: .now)
            // The block list the coordinator loads at start comes from the stranger cache's operator lists.
            identities.setOperatorLists(OperatorLists(allowed: allowed, blocked: blocked))
            let machine = BridgeMachine(router: router, configuration: .init(
                keys: keys, fleet: fleet, sync: sync ? SyncResponder.Configuration() : nil, boardCopies: boardLedger != nil, seed: 1))
            coordinator = BridgeCoordinator(
                machine: machine, mesh: bridgeNode, relays: relays,
                stores: BridgeStores(
                    recent: recent, identities: identities, uplinks: uplinks, moderationLog: moderation, externalChanges: database,
                    syncJournal: syncJournal, boardLedger: boardLedger, fleetList: fleetList),
                logger: Logger(label: "bridge", level: .debug, sink: sink), time: SystemTime())
        }

        /// Runs the nodes and the coordinator while `body` runs, then stops the coordinator gracefully.
        func run(_ body: @Sendable (World) async throws -> Void) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { [bridgeNode] in await bridgeNode.run() }
                group.addTask { [phone] in await phone.run() }
                group.addTask { [phone, seen] in
                    for await action in phone.actions { seen.append(action) }
                }
                let running = Task { [coordinator, intake] in await coordinator.run(relayInputs: intake.stream) }
                intake.yield(.connectedRelays(1))
                try await body(self)
                await coordinator.shutdown()
                await running.value
                // Bounded: the phone has a moment to take the bridge's last frames (the leave) in.
                _ = await seen.waitFor(within: 2) { if case .peerLost = $0 { return true } else { return false } }
                group.cancelAll()
            }
        }

        func channelEvent(_ key: SchnorrSecretKey, _ text: String) throws -> NostrEvent {
            try UnsignedEvent(
                pubkey: key.publicKey, createdAt: Int64(Date().timeIntervalSince1970), kind: NostrKind.ephemeralChat,
                tags: [["g", CoordinatorTests.geohash], ["n", "alice"]], content: text
            ).signed(with: key)
        }
    }

    /// Waits until `done` holds for the coordinator's snapshot: it is read again after each line the bridge logs
    /// (every decision logs, at debug level, in the same actor turn that counts it), at most 60 s in all.
    static func waitForSnapshot(_ world: World, _ done: (BridgeCoordinator.Snapshot) -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let lines = world.sink.lines.all.count
            if done(await world.coordinator.snapshot()) { return true }
            _ = await world.sink.lines.first(after: lines, within: 5) { _ in true }
        }
        return done(await world.coordinator.snapshot())
    }

    static func fleetEvent(_ key: SchnorrSecretKey, at createdAt: Int64, site: String, tags: [[String]]) throws -> NostrEvent {
        try UnsignedEvent(pubkey: key.publicKey, createdAt: createdAt, kind: FleetList.kind, tags: [["d", site]] + tags, content: "")
            .signed(with: key)
    }

    @Test("fleet list from a relay: the operator's block hides the sender, a newer list unblocks; a stranger's list is ignored")
    func fleetListFromRelay() async throws {
        let operatorKey = try SchnorrSecretKey(bytes: [UInt8](repeating: 40, count: 32))
        let stranger = try SchnorrSecretKey(bytes: [UInt8](repeating: 41, count: 32))
        let alice = try SchnorrSecretKey(bytes: [UInt8](repeating: 42, count: 32))
        let bob = try SchnorrSecretKey(bytes: [UInt8](repeating: 43, count: 32))
        let world = try World(fleet: FleetSettings(
            site: Self.geohash, operators: [operatorKey.publicKey], publisher: nil))
        let now = Int64(Date().timeIntervalSince1970)
        let blockedRule = BridgeCounters.HiddenKey(direction: .nostrToMesh, rule: .blocked)
        try await world.run { world in
            world.intake.yield(.event(try Self.fleetEvent(stranger, at: now, site: Self.geohash, tags: [["p", bob.publicKey.hex]])))
            world.intake.yield(.event(try Self.fleetEvent(operatorKey, at: now - 10, site: Self.geohash, tags: [["p", alice.publicKey.hex]])))
            #expect(try await Self.waitForSnapshot(world) { $0.fleetLists[.applied] == 1 && $0.fleetLists[.ignoredAuthor] == 1 })
            func reached(_ event: NostrEvent) async -> Bool {
                await world.seen.waitFor { action in
                    if case .carrier(let carrier) = action { return carrier.payload.eventJSON == event.jsonBytes }
                    return false
                }
            }
            let bobLine = try world.channelEvent(bob, "bob, the stranger's list named him")
            world.intake.yield(.event(try world.channelEvent(alice, "alice while blocked")))
            world.intake.yield(.event(bobLine))
            #expect(try await Self.waitForSnapshot(world) { $0.router.hidden[blockedRule] == 1 })
            #expect(await reached(bobLine))
            // The operator's newer list no longer names alice: her next line crosses.
            world.intake.yield(.event(try Self.fleetEvent(operatorKey, at: now, site: Self.geohash, tags: [])))
            #expect(try await Self.waitForSnapshot(world) { $0.fleetLists[.applied] == 2 })
            let aliceLine = try world.channelEvent(alice, "alice unblocked")
            world.intake.yield(.event(aliceLine))
            #expect(await reached(aliceLine))
        }
        let snapshot = await world.coordinator.snapshot()
        #expect(snapshot.router.hidden[blockedRule] == 1 && snapshot.blockedKeys == 0)
    }

    @Test("a publishing bridge: the console's block becomes a signed fleet list (read-modify-write), applied at once and kept")
    func fleetListPublished() async throws {
        let operatorKey = try SchnorrSecretKey(bytes: [UInt8](repeating: 44, count: 32))
        let alice = try SchnorrSecretKey(bytes: [UInt8](repeating: 45, count: 32))
        let peer = try IdentityKey(kind: .mesh, bytes: [UInt8](repeating: 0x66, count: 32))
        let kept = InMemoryFleetList()
        let world = try World(fleet: FleetSettings(
            site: Self.geohash, operators: [operatorKey.publicKey], publisher: operatorKey), fleetList: kept)
        let now = Int64(Date().timeIntervalSince1970)
        // The newest list on the relays already names a mesh peer and a word: the change keeps them.
        let existing = try Self.fleetEvent(operatorKey, at: now + 100, site: Self.geohash, tags: [["mesh", peer.hex], ["word", "giveaway"]])
        try await world.run { world in
            world.intake.yield(.event(existing))
            #expect(try await Self.waitForSnapshot(world) { $0.fleetLists[.applied] == 1 })
            world.coordinator.submit(.fleetChange(.block(try .nostr(pubkey: alice.publicKey.bytes))))
            #expect(try await Self.waitForSnapshot(world) { $0.fleetLists[.applied] == 2 && $0.blockedKeys == 2 })
            world.intake.yield(.event(try world.channelEvent(alice, "blocked by the fleet")))
            world.intake.yield(.event(try world.channelEvent(try SchnorrSecretKey(bytes: [UInt8](repeating: 46, count: 32)), "GIVEAWAY here")))
            #expect(try await Self.waitForSnapshot(world) {
                $0.router.hidden[.init(direction: .nostrToMesh, rule: .blocked)] == 1
                    && $0.router.hidden[.init(direction: .nostrToMesh, rule: .denylist)] == 1
            })
        }
        let published = try #require(world.relays.published.withLock { $0 }.first { $0.kind == FleetList.kind })
        #expect(published.pubkey == operatorKey.publicKey)
        #expect(published.createdAt == now + 101, "newer than the list it replaces, though the clock is behind it")
        let list = try FleetList(event: published, site: Self.geohash, operators: [operatorKey.publicKey])
        #expect(list.blocked == [peer, try .nostr(pubkey: alice.publicKey.bytes)] && list.words == ["giveaway"])
        #expect(kept.event == published, "the list in force is kept for the next start")
    }

    @Test("a kept fleet list is offered at start (through the store, no file): its block is in force before any relay answers")
    func keptFleetListAtStart() async throws {
        let operatorKey = try SchnorrSecretKey(bytes: [UInt8](repeating: 47, count: 32))
        let alice = try SchnorrSecretKey(bytes: [UInt8](repeating: 48, count: 32))
        let now = Int64(Date().timeIntervalSince1970)
        let kept = InMemoryFleetList(try Self.fleetEvent(operatorKey, at: now - 60, site: Self.geohash, tags: [["p", alice.publicKey.hex]]))
        let world = try World(
            fleet: FleetSettings(site: Self.geohash, operators: [operatorKey.publicKey], publisher: nil), fleetList: kept)
        try await world.run { world in
            #expect(try await Self.waitForSnapshot(world) { $0.fleetLists[.applied] == 1 && $0.blockedKeys == 1 })
            world.intake.yield(.event(try world.channelEvent(alice, "alice, blocked by the kept list")))
            #expect(try await Self.waitForSnapshot(world) { $0.router.hidden[.init(direction: .nostrToMesh, rule: .blocked)] == 1 })
        }
    }

    @Test("new spam limits from the console apply at once, without a restart: a one-message bucket hides the sender's second line")
    func spamLimitsApplyLive() async throws {
        let world = try World()
        let alice = try SchnorrSecretKey(bytes: [UInt8](repeating: 47, count: 32))
        try await world.run { world in
            func reached(_ event: NostrEvent) async -> Bool {
                await world.seen.waitFor { action in
                    if case .carrier(let carrier) = action { return carrier.payload.eventJSON == event.jsonBytes }
                    return false
                }
            }
            // Under the default limits (6 messages at once) two lines cross.
            for text in ["first line at the gate", "second line about the stage"] {
                let event = try world.channelEvent(alice, text)
                world.intake.yield(.event(event))
                #expect(await reached(event))
            }
            var tight = SpamFilterConfig()
            tight.messageBucket = .init(capacity: 1, refillTokens: 1, refillSeconds: 3_600)
            world.coordinator.submit(.setSpamLimits(tight))
            #expect(await world.sink.lines.first(within: 60) { $0.message == "spam limits set" } != nil)
            // A fresh budget of one: the third line crosses, the fourth is hidden.
            let third = try world.channelEvent(alice, "third line, water at gate C")
            world.intake.yield(.event(third))
            #expect(await reached(third))
            world.intake.yield(.event(try world.channelEvent(alice, "fourth line, lost and found")))
            #expect(try await Self.waitForSnapshot(world) { $0.router.hidden(.nostrToMesh) == 1 })
        }
        #expect(await world.coordinator.spamConfig.messageBucket.capacity == 1)
        #expect(await world.coordinator.isShadowMode == false, "shadow mode is its own setting, kept")
    }

    @Test("a channel event reaches the phone as a fromGateway carrier, remembered before it is sent")
    func downlink() async throws {
        let world = try World()
        let alice = try SchnorrSecretKey(bytes: [UInt8](repeating: 5, count: 32))
        let event = try world.channelEvent(alice, "see you at the main stage")
        try await world.run { world in
            world.intake.yield(.event(event))
            let seen = await world.seen.waitFor { action in
                if case .carrier(let carrier) = action { return carrier.payload.direction == .fromGateway
                    && carrier.payload.eventJSON == event.jsonBytes }
                return false
            }
            #expect(seen, "the phone never saw the carrier")
        }
        #expect(world.recent.rows.contains { $0.0 == event.id.bytes && $0.1 == .rebroadcast })
        let snapshot = await world.coordinator.snapshot()
        #expect(snapshot.airtime.broadcasts[.gateway] == 1)
    }

    @Test("gossip sync keeps only what verified and what the judgement passed: the phone's announce, not the hidden copies")
    func syncStoresOnlyPassedMessages() async throws {
        let world = try World(sync: true)
        try await world.run { world in
            #expect(await world.seen.waitFor { if case .peerVerified = $0 { return true } else { return false } })
            // Eight copies of one line at once: the burst passes, the rest is hidden by the filter.
            for i in 0..<8 { _ = await world.phone.submit(.sendPublicMessage("BUY TOKENS NOW \(i)")) }
            _ = try await Self.waitForSnapshot(world) { $0.router.hidden(.meshToNostr) + $0.syncStored[.message] >= 8 }
        }
        let snapshot = await world.coordinator.snapshot()
        let hidden = snapshot.router.hidden(.meshToNostr)
        let store = try #require(world.syncStore)
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        #expect(hidden >= 1, "the copy burst was hidden in part")
        #expect(store.packets(.message, now: now).count == 8 - hidden, "hidden copies are never served by sync")
        #expect(snapshot.syncStored[.message] == 8 - hidden)
        #expect(store.packets(.announce, now: now).count == 1, "the phone's verified announce")
    }

    @Test("board posts are judged like messages: a blocked author's post is hidden (moderation log), not kept; another is kept")
    func boardPostsAreJudged() async throws {
        let noise = X25519PrivateKey.generate()
        let signing = Ed25519PrivateKey.generate()
        let blocked = try IdentityKey.mesh(noiseKey: noise.publicKey)
        let world = try World(blocked: [blocked], sync: true, phoneKey: noise, phoneSigning: signing)
        let other = Ed25519PrivateKey.generate()
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        func post(_ text: String, _ key: Ed25519PrivateKey, id: UInt8) throws -> MeshPacket {
            let post = try BoardPost.signed(
                postID: [UInt8](repeating: id, count: 16), geohash: "", content: text, nickname: "n", createdAt: now,
                expiresAt: now + 3_600_000, flags: 0, key: key)
            return MeshPacket(type: .boardPost, timestamp: now, sender: MeshPeerID(rawValue: 0), payload: BoardPayload.post(post).encode())
        }
        // The blocked phone's own post (its announce key) and a post by an author the bridge never met.
        let posts = [try post("free tokens", signing, id: 1), try post("water point at gate C", other, id: 2)]
        try await world.run { world in
            #expect(await world.seen.waitFor { if case .peerVerified = $0 { return true } else { return false } })
            for packet in posts { _ = await world.phone.submit(.originate(packet, sign: true)) }
            _ = try await Self.waitForSnapshot(world) { $0.boardPackets.total >= 2 }
        }
        let snapshot = await world.coordinator.snapshot()
        #expect(snapshot.boardPackets[.hidden] == 1)
        #expect(snapshot.boardPackets[.accepted] == 1)
        #expect(snapshot.router.hidden[.init(direction: .meshToNostr, rule: .blocked)] == 1)
        let store = try #require(world.syncStore)
        #expect(store.livePosts(now: now + 1).map(\.content) == ["water point at gate C"])
        // A row of the moderation log like every hide: the blocked post, with the identity that is blocked.
        let records = world.moderation.records.all
        #expect(records.map(\.rule) == [.blocked] && records.first?.text == "free tokens", "\(records)")
        #expect(records.first?.figures["identity"]?.stringValue?.hasPrefix("mesh:") == true)
    }

    @Test("every broadcast carrier is packet-signed and verifies under the key in the bridge's own announce (issue 16 part 4)")
    func carriersAreSigned() async throws {
        let world = try World()
        // A listener on the same air that records every raw frame (it never sends).
        let sniffer = world.air.join()
        let frames = Recorder<[UInt8]>()
        let listening = Task {
            for await event in sniffer.events { if case .frame(_, let bytes) = event { frames.append(bytes) } }
        }
        let bridgeID = MeshPeerID(noisePublicKey: world.keys.noiseKey.publicKey)
        let events = try (0..<4).map { i in
            try world.channelEvent(try SchnorrSecretKey(bytes: [UInt8](repeating: UInt8(20 + i), count: 32)), "line \(i)")
        }
        try await world.run { world in
            for event in events { world.intake.yield(.event(event)) }
            _ = await frames.count(events.count, within: 60) { (try? MeshPacket.decode($0))?.type == .nostrCarrier }
        }
        listening.cancel()
        sniffer.close()
        let packets = frames.all.compactMap { try? MeshPacket.decode($0) }.filter { $0.sender == bridgeID }
        let announce = try #require(packets.first { $0.type == .announce }, "no announce from the bridge on the air")
        let announced = try AnnouncePayload.decode(announce.payload)
        let key = try Ed25519PublicKey(rawRepresentation: announced.signingPublicKey)
        #expect(announce.verifySignature(key).isValid)
        let carriers = packets.filter { $0.type == .nostrCarrier }
        #expect(carriers.count == events.count)
        for carrier in carriers {
            #expect(carrier.recipient == nil, "a downlink is a broadcast")
            #expect(carrier.signature != nil && carrier.verifySignature(key).isValid, "carrier not signed with the announced key")
            #expect(!carrier.verifySignature(Ed25519PrivateKey.generate().publicKey).isValid)
        }
    }

    @Test("the operator's allowed Nostr keys go to the relay side as priority authors; blocked ones do not")
    func priorityAuthorsReachTheRelaySide() async throws {
        let regular = try SchnorrSecretKey(bytes: [UInt8](repeating: 6, count: 32))
        let spammer = try SchnorrSecretKey(bytes: [UInt8](repeating: 7, count: 32))
        let world = try World(
            blocked: [try .nostr(pubkey: spammer.publicKey.bytes)], allowed: [try .nostr(pubkey: regular.publicKey.bytes)])
        try await world.run { world in
            _ = await world.relays.priorityAuthors.first(within: 60) { _ in true }
        }
        #expect(world.relays.priorityAuthors.all.last == [regular.publicKey.hex])
    }

    @Test("a blocked author is hidden: logged, counted, nothing crosses; spam goes to the moderation-log store")
    func hidden() async throws {
        let spammer = try SchnorrSecretKey(bytes: [UInt8](repeating: 6, count: 32))
        let blocked = try SchnorrSecretKey(bytes: [UInt8](repeating: 7, count: 32))
        let world = try World(blocked: [try IdentityKey.nostr(pubkey: blocked.publicKey.bytes)])
        try await world.run { world in
            world.intake.yield(.event(try world.channelEvent(blocked, "hello from a blocked key")))
            // Eight copies of one line at once: the burst (6) passes, the rest is hidden by the filter.
            for i in 0..<8 { world.intake.yield(.event(try world.channelEvent(spammer, "BUY TOKENS NOW \(i)"))) }
            // The blocked line is a row too: wait for it and at least one spam row.
            _ = await world.moderation.records.count(2, within: 60) { _ in true }
        }
        let snapshot = await world.coordinator.snapshot()
        #expect(snapshot.router.hidden[.init(direction: .nostrToMesh, rule: .blocked)] == 1)
        #expect(snapshot.router.hidden.total >= 2)
        let records = world.moderation.records.all
        #expect(!records.isEmpty && records.allSatisfy { $0.direction == .nostrToMesh && $0.channel == CoordinatorTests.geohash })
        #expect(snapshot.moderationRecords == records.count)
        #expect(world.sink.lines.all.contains { $0.message == "hidden" && $0.jsonLine.contains("\"blocked\"") })
    }

    @Test("a block written by another connection (the CLI's `identities block`, which then notifies the control socket) applies to the running bridge")
    func blockFromAnotherProcess() async throws {
        let path = NSTemporaryDirectory() + "coordinator-\(UUID().uuidString).sqlite3"
        let world = try World(database: try SQLiteDatabase(path: path))
        let mallory = try SchnorrSecretKey(bytes: [UInt8](repeating: 9, count: 32))
        try await world.run { world in
            world.intake.yield(.event(try world.channelEvent(mallory, "first, before the block")))
            #expect(await world.seen.waitFor { if case .carrier = $0 { return true } else { return false } })
            // What `bitchat-bridge identities block` does, on its own connection.
            let cli = PeerIdentityCache(
                store: try SQLiteIdentityStore(database: try SQLiteDatabase(path: path)), logger: Logger(label: "cli", level: .error))
            _ = try cli.annotate(try IdentityKey.nostr(pubkey: mallory.publicKey.bytes)) { $0.blocked = true }
            // …and tells the running bridge on its control socket (`ControlCommands`, op `stores.changed`).
            world.coordinator.storesChanged()
            _ = try await Self.waitForSnapshot(world) { $0.blockedKeys > 0 }
            world.intake.yield(.event(try world.channelEvent(mallory, "second, after the block")))
            _ = try await Self.waitForSnapshot(world) { $0.router.hidden.total > 0 }
        }
        let snapshot = await world.coordinator.snapshot()
        #expect(snapshot.blockedKeys == 1)
        #expect(snapshot.router.hidden[.init(direction: .nostrToMesh, rule: .blocked)] == 1)
        #expect(snapshot.airtime.broadcasts.total == 1)
    }

    @Test("metrics: the uplink store's drops and the moderation-log count reach /metrics (issue 15 defect 1)")
    func metricsFromTheCoordinator() async throws {
        let world = try World()
        world.uplinks.counters.dropped = 2
        world.uplinks.counters.expired = 1
        let spammer = try SchnorrSecretKey(bytes: [UInt8](repeating: 10, count: 32))
        try await world.run { world in
            for i in 0..<8 { world.intake.yield(.event(try world.channelEvent(spammer, "same line again \(i)"))) }
            _ = await world.moderation.records.first(within: 60) { _ in true }
        }
        var metrics = BridgeMetrics()
        metrics.add(await world.coordinator.snapshot())
        let snapshot = metrics.snapshot()
        #expect(snapshot.value("bitchat_bridge_queue_dropped_total", labels: [.init("queue", "uplink_store")]) == 3)
        #expect(snapshot.value("bitchat_bridge_queue_depth", labels: [.init("queue", "uplink_store")]) == 0)
        let records = Double(world.moderation.records.all.count)
        #expect(records > 0 && snapshot.value("bitchat_bridge_moderation_log_records") == records)
    }

    @Test("a full disk fails the event-id write: the event is forwarded anyway, the failure counted")
    func diskFull() async throws {
        let world = try World()
        world.recent.failWith = SQLiteError(code: 13, message: "database or disk is full", operation: "step")
        let alice = try SchnorrSecretKey(bytes: [UInt8](repeating: 8, count: 32))
        let event = try world.channelEvent(alice, "the disk is full but chat goes on")
        try await world.run { world in
            world.intake.yield(.event(event))
            #expect(await world.seen.waitFor { if case .carrier = $0 { return true } else { return false } })
        }
        let snapshot = await world.coordinator.snapshot()
        #expect(snapshot.coordinator.failedPersists == 1)
        #expect(world.sink.lines.all.contains { $0.jsonLine.contains("\"disk_full\":true") })
    }

    @Test("shutdown: the signed leave is the last mesh submission and reaches the phone")
    func leaveAtShutdown() async throws {
        let world = try World()
        try await world.run { world in
            // The phone must know the bridge (its announce) before a leave can verify.
            let known = await world.seen.waitFor { action in
                if case .peerVerified(let peer) = action { return peer.nickname == "bridge" }
                return false
            }
            #expect(known)
        }
        #expect(await world.seen.waitFor(within: 0) { action in
            if case .peerLost(_, let reason) = action { return reason == .leave }
            return false
        }, "the phone never saw the bridge's leave: \(world.seen.all)")
    }
}
