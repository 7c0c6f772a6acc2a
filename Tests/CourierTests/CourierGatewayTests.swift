import BitchatWire
import BotCrypto
import BotSupport
import Courier
import Nostr
import Testing

/// The courier gateway machine (issue 24) on its own: deposits, publishing, watching, drops and delivery, with time
/// passed in (COURIER.md §2.5, §3, §4.2).
@Suite("Courier gateway machine")
struct CourierGatewayTests {
    static let t0: UInt64 = 1_750_000_000_000  // day 20254
    static let bridgeKey = [UInt8](repeating: 0x44, count: 32)
    static let phoneA = MeshPeerID(noisePublicKey: [UInt8](repeating: 0x11, count: 32))
    static let phoneB = MeshPeerID(noisePublicKey: [UInt8](repeating: 0x22, count: 32))
    static let keyB = [UInt8](repeating: 0x22, count: 32)

    static func gateway(_ tweak: (inout CourierGateway.Configuration) -> Void = { _ in }, restored: CourierGateway.Restored = .init()) -> CourierGateway {
        var configuration = CourierGateway.Configuration(ownNoiseKey: bridgeKey, dropKeySeed: [UInt8](repeating: 7, count: 32))
        tweak(&configuration)
        return CourierGateway(configuration: configuration, restored: restored)
    }

    static func envelope(for key: [UInt8], at now: UInt64 = t0, expiresIn: UInt64 = 3_600_000, ciphertext: [UInt8]? = nil, copies: UInt8 = 4) -> CourierEnvelope {
        CourierEnvelope(
            recipientTag: CourierTag.tag(noiseKey: key, day: CourierTag.day(unixSeconds: Int64(now / 1000))),
            expiryMs: now + expiresIn, ciphertext: ciphertext ?? SecureRandom.bytes(200), copies: copies)
    }

    static func drop(
        _ envelope: CourierEnvelope, x: String? = nil, expiration: String? = nil, content: String? = nil, createdAt: Int64 = Int64(t0 / 1000)
    ) throws -> NostrEvent {
        let key = try SchnorrSecretKey(bytes: SecureRandom.bytes(32))
        let unsigned = UnsignedEvent(
            pubkey: key.publicKey, createdAt: createdAt, kind: 1401,
            tags: [["x", x ?? Hex.encode(envelope.recipientTag)], ["expiration", expiration ?? String(envelope.expiryMs / 1000)]],
            content: try content ?? Base64.encode(envelope.withCopies(1).encode()))
        return try unsigned.signed(with: key)
    }

    static func published(_ actions: [CourierGateway.Action]) -> [NostrEvent] {
        actions.compactMap { if case .publish(let event) = $0 { event } else { nil } }
    }

    static func deliveries(_ actions: [CourierGateway.Action]) -> [(MeshPeerID, [UInt8], CourierGateway.DeliveryRef)] {
        actions.compactMap { if case .deliver(let peer, let bytes, let ref) = $0 { (peer, bytes, ref) } else { nil } }
    }

    @Test("a deposit is held and published at once as a drop: fresh key, x and expiration tags, copies 1; again only after 30 min")
    func depositPublishes() throws {
        var gateway = Self.gateway()
        _ = gateway.handle(.relaysConnected(1), nowMs: Self.t0)
        let envelope = Self.envelope(for: Self.keyB)
        let actions = gateway.handle(.deposit(from: Self.phoneA, envelope: try envelope.encode()), nowMs: Self.t0)
        #expect(actions.contains { if case .storeHeld(let held) = $0 { held.envelope == envelope && held.depositor == Self.phoneA } else { false } })
        let first = try #require(Self.published(actions).first)
        #expect(first.kind == 1401 && first.tags == [["x", Hex.encode(envelope.recipientTag)], ["expiration", String(envelope.expiryMs / 1000)]])
        #expect(try CourierEnvelope.decode(try Base64.decode(first.content)) == envelope.withCopies(1))
        #expect(gateway.counters.deposits[.accepted] == 1 && gateway.counters.publishes[.sent] == 1)

        // OK true: counted, and nothing more until 30 min after it.
        _ = gateway.handle(.published(first.id, accepted: true), nowMs: Self.t0 + 500)
        #expect(gateway.counters.publishes[.confirmed] == 1)
        #expect(Self.published(gateway.handle(.deadline, nowMs: Self.t0 + 29 * 60_000)).isEmpty)
        #expect(gateway.nextDeadline() == Self.t0 + 500 + 30 * 60_000)
        let again = try #require(Self.published(gateway.handle(.deadline, nowMs: Self.t0 + 500 + 30 * 60_000)).first)
        #expect(again.pubkey != first.pubkey && again.content == first.content, "a fresh key for every publish")
        // Unanswered for 10 s: not confirmed, tried again a minute later.
        _ = gateway.handle(.deadline, nowMs: Self.t0 + 500 + 30 * 60_000 + 10_000)
        #expect(gateway.counters.publishes[.unanswered] == 1)
        #expect(Self.published(gateway.handle(.deadline, nowMs: Self.t0 + 500 + 30 * 60_000 + 30_000)).isEmpty)
        #expect(Self.published(gateway.handle(.deadline, nowMs: Self.t0 + 500 + 31 * 60_000 + 10_000)).count == 1)
    }

    @Test("no relay connected: a deposit is held and published when one connects")
    func publishWaitsForARelay() throws {
        var gateway = Self.gateway()
        let actions = gateway.handle(.deposit(from: Self.phoneA, envelope: try Self.envelope(for: Self.keyB).encode()), nowMs: Self.t0)
        #expect(Self.published(actions).isEmpty && gateway.heldCount == 1)
        #expect(Self.published(gateway.handle(.relaysConnected(2), nowMs: Self.t0 + 1_000)).count == 1)
    }

    @Test("deposits refused: malformed, expired, expiry beyond 25 h, for the bridge, a repeat, over the rate and the depositor's quota")
    func depositRefusals() throws {
        var gateway = Self.gateway()
        func deposit(_ bytes: [UInt8], from peer: MeshPeerID = Self.phoneA, at now: UInt64 = Self.t0) {
            _ = gateway.handle(.deposit(from: peer, envelope: bytes), nowMs: now)
        }
        deposit([0x01, 0x00])
        deposit(try Self.envelope(for: Self.keyB, expiresIn: 0).encode())
        deposit(try Self.envelope(for: Self.keyB, expiresIn: 25 * 3_600_000 + 1).encode())
        deposit(try Self.envelope(for: Self.bridgeKey).encode())
        let kept = try Self.envelope(for: Self.keyB).encode()
        deposit(kept)
        deposit(kept)
        for _ in 0..<5 { deposit(try Self.envelope(for: Self.keyB).encode()) }
        let c = gateway.counters.deposits
        #expect(c[.malformed] == 1 && c[.expired] == 1 && c[.expiryTooFar] == 1 && c[.forBridge] == 1 && c[.duplicate] == 1)
        #expect(c[.accepted] == 5 && c[.depositorFull] == 1, "5 per depositor: \(c)")
        // Another depositor, 11 in one minute: the 11th is over the rate (10 a minute).
        var other = Self.gateway { $0.perDepositor = 100 }
        for _ in 0..<11 { _ = other.handle(.deposit(from: Self.phoneB, envelope: try Self.envelope(for: Self.keyB).encode()), nowMs: Self.t0) }
        #expect(other.counters.deposits[.accepted] == 10 && other.counters.deposits[.rateLimited] == 1)
        // A full store evicts its oldest envelope.
        var small = Self.gateway { $0.storeMax = 2 }
        for (index, peer) in [Self.phoneA, Self.phoneB, MeshPeerID(rawValue: 9)].enumerated() {
            let actions = small.handle(.deposit(from: peer, envelope: try Self.envelope(for: Self.keyB).encode()), nowMs: Self.t0 + UInt64(index))
            if index == 2 { #expect(actions.contains { if case .removeHeld = $0 { true } else { false } }) }
        }
        #expect(small.heldCount == 2 && small.counters.evictions[.held] == 1)
    }

    @Test("watching: verified peers' tags (day − 1, d, d + 1) after the debounce; a new peer re-sends only its chunk; lost peers 15 min on")
    func watching() throws {
        var gateway = Self.gateway { $0.tagsPerFilter = 6 }  // 2 peers per subscription
        let peers = (1...3).map { [UInt8](repeating: UInt8($0), count: 32) }
        for key in peers.prefix(2) { _ = gateway.handle(.peerVerified(MeshPeerID(noisePublicKey: key), noiseKey: key, direct: false), nowMs: Self.t0) }
        #expect(gateway.nextDeadline() == Self.t0 + 5_000)
        let first = gateway.handle(.deadline, nowMs: Self.t0 + 5_000)
        guard case .subscribe(let id, let filter) = try #require(first.first), first.count == 1 else {
            Issue.record("one subscription: \(first)")
            return
        }
        let expected = peers.prefix(2).flatMap { CourierTag.candidates(noiseKey: $0, unixSeconds: Int64(Self.t0 / 1000)).map(Hex.encode) }.sorted()
        #expect(id == "courier-0" && filter.kinds == [1401] && filter.tags == ["x": expected] && filter.limit == 500)
        #expect(filter.since == Int64((Self.t0 + 5_000) / 1000) - 86_400, "a day back from the subscription")

        // A third peer goes to the second chunk: only that one is sent.
        _ = gateway.handle(.peerVerified(MeshPeerID(noisePublicKey: peers[2]), noiseKey: peers[2], direct: false), nowMs: Self.t0 + 6_000)
        let second = gateway.handle(.deadline, nowMs: Self.t0 + 11_000)
        #expect(second.count == 1 && second.contains { if case .subscribe("courier-1", _) = $0 { true } else { false } }, "\(second)")

        // The third peer leaves the mesh: still watched for 15 min, then its chunk is closed.
        _ = gateway.handle(.peerLost(MeshPeerID(noisePublicKey: peers[2])), nowMs: Self.t0 + 20_000)
        #expect(gateway.handle(.deadline, nowMs: Self.t0 + 20_000 + 14 * 60_000).isEmpty)
        _ = gateway.handle(.deadline, nowMs: Self.t0 + 20_000 + 15 * 60_000)
        let closed = gateway.handle(.deadline, nowMs: Self.t0 + 20_000 + 15 * 60_000 + 5_000)
        #expect(closed == [.unsubscribe(id: "courier-1")], "\(closed)")

        // The UTC day changes: every chunk again, with the new days' tags.
        let midnight = (Self.t0 / 86_400_000 + 1) * 86_400_000
        #expect(gateway.nextDeadline() == midnight)
        let rolled = gateway.handle(.deadline, nowMs: midnight)
        #expect(rolled.count == 1 && rolled.contains { if case .subscribe("courier-0", _) = $0 { true } else { false } }, "\(rolled)")
    }

    /// The tag count of each subscription in `actions`, by id.
    static func subscribed(_ actions: [CourierGateway.Action]) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: actions.compactMap { if case .subscribe(let id, let filter) = $0 { (id, filter.tags["x"]?.count ?? 0) } else { nil } })
    }

    @Test("a relay refusing a filter halves the chunks (300 → 150 → 75 → 48 tags), once per refusal, and every subscription goes again; not for auth-required, rate-limited, duplicate, too many subscriptions or an unrelated NOTICE; never below iOS's 48")
    func refusedFilterHalves() throws {
        var gateway = Self.gateway()
        let keys = (0..<20).map { [UInt8](repeating: UInt8(0x60 + $0), count: 32) }
        for key in keys { _ = gateway.handle(.peerVerified(MeshPeerID(noisePublicKey: key), noiseKey: key, direct: false), nowMs: Self.t0) }
        #expect(Self.subscribed(gateway.handle(.deadline, nowMs: Self.t0 + 5_000)) == ["courier-0": 60])
        let notAboutTheFilter: [(String?, String)] = [
            ("courier-0", "rate-limited: slow down"), ("courier-0", "auth-required: sign in"), (nil, "welcome!"), ("other", "error: no"),
            ("courier-0", "duplicate: courier-0 is open"), ("courier-0-older", "Too many subscriptions: Number of subscriptions must be less than or equal to 10"),
            (nil, "Subscription rejected: Duplicate subscription courier-0: Ignoring"),
        ]
        for (subscription, message) in notAboutTheFilter {
            _ = gateway.handle(.refused(subscription: subscription, message: message), nowMs: Self.t0 + 6_000)
        }
        #expect(gateway.tagsPerFilter == 300 && gateway.counters.filterHalvings == 0)

        // Every relay answers the same REQ: one halving. The subscription goes again though its tags fit as they are.
        for _ in 0..<3 { _ = gateway.handle(.refused(subscription: "courier-0", message: "error: too many tag values"), nowMs: Self.t0 + 7_000) }
        #expect(gateway.tagsPerFilter == 150 && gateway.counters.filterHalvings == 1)
        #expect(Self.subscribed(gateway.handle(.deadline, nowMs: Self.t0 + 12_000)) == ["courier-0": 60])
        // A NOTICE that names a filter (strfry's bad REQ), then a CLOSED of the backfill: 75, then 48 — 16 peers and 4.
        _ = gateway.handle(.refused(subscription: nil, message: "ERROR: bad req: filter item too large"), nowMs: Self.t0 + 13_000)
        #expect(gateway.tagsPerFilter == 75)
        _ = gateway.handle(.deadline, nowMs: Self.t0 + 18_000)
        _ = gateway.handle(.refused(subscription: "courier-0-older", message: "blocked: filter too big"), nowMs: Self.t0 + 19_000)
        #expect(Self.subscribed(gateway.handle(.deadline, nowMs: Self.t0 + 24_000)) == ["courier-0": 48, "courier-1": 12])
        // At the floor nothing changes, and nothing is sent again.
        _ = gateway.handle(.refused(subscription: "courier-1", message: "error: nope"), nowMs: Self.t0 + 25_000)
        #expect(gateway.tagsPerFilter == 48 && gateway.counters.filterHalvings == 3 && gateway.watchedCount == 20)
        #expect(gateway.handle(.deadline, nowMs: Self.t0 + 30_000).isEmpty)
        // Every peer's drops are still found.
        let last = MeshPeerID(noisePublicKey: keys[19])
        _ = gateway.handle(.peerVerified(last, noiseKey: keys[19], direct: true), nowMs: Self.t0 + 31_000)
        #expect(Self.deliveries(gateway.handle(.drop(try Self.drop(Self.envelope(for: keys[19]))), nowMs: Self.t0 + 32_000)).map(\.0) == [last])

        // With room for fewer peers than are watched, direct peers keep their places; the rest are counted as overflow.
        var small = Self.gateway { $0.maxSubscriptions = 1; $0.tagsPerFilter = 96 }  // 32 peers, then 16
        for (index, key) in keys.enumerated() {
            _ = small.handle(.peerVerified(MeshPeerID(noisePublicKey: key), noiseKey: key, direct: index < 2), nowMs: Self.t0 + UInt64(index))
        }
        _ = small.handle(.refused(subscription: "courier-0", message: "error: too big"), nowMs: Self.t0 + 1_000)
        #expect(small.watchedCount == 16 && small.counters.watchOverflow == 4)
        let handed = Self.deliveries(small.handle(.drop(try Self.drop(Self.envelope(for: keys[0]))), nowMs: Self.t0 + 2_000))
        #expect(handed.count == 1, "the direct peer verified first is still watched")
    }

    @Test("the engine's whole table after dropped reports: its peers are watched (direct ones get mail), watched peers missing from it count as lost")
    func resync() throws {
        var gateway = Self.gateway()
        let keyC = [UInt8](repeating: 0x33, count: 32)
        let phoneC = MeshPeerID(noisePublicKey: keyC)
        _ = gateway.handle(.peerVerified(Self.phoneA, noiseKey: [UInt8](repeating: 0x11, count: 32), direct: true), nowMs: Self.t0)
        _ = gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: false), nowMs: Self.t0)
        // Reports dropped meanwhile: A left, B came direct, C arrived.
        _ = gateway.handle(.peersResync([.init(id: Self.phoneB, noiseKey: Self.keyB, direct: true), .init(id: phoneC, noiseKey: keyC, direct: false)]),
                           nowMs: Self.t0 + 1_000)
        #expect(gateway.watchedCount == 3)
        #expect(Self.deliveries(gateway.handle(.drop(try Self.drop(Self.envelope(for: Self.keyB))), nowMs: Self.t0 + 2_000)).map(\.0) == [Self.phoneB])
        _ = gateway.handle(.deadline, nowMs: Self.t0 + 1_000 + 15 * 60_000)
        #expect(gateway.watchedCount == 2, "A was lost at the resync: watched 15 min more")
    }

    @Test("a full watch list frees the place of the peer lost longest ago, else of the indirect peer verified longest ago; a peer that comes back or is verified again goes to the back")
    func evictionOrder() throws {
        var gateway = Self.gateway { $0.maxSubscriptions = 2; $0.tagsPerFilter = 6 }  // 2 × 2 peers
        let keys = (0..<8).map { [UInt8](repeating: UInt8(0x70 + $0), count: 32) }
        var now = Self.t0
        func verify(_ index: Int) {
            now += 1_000
            _ = gateway.handle(.peerVerified(MeshPeerID(noisePublicKey: keys[index]), noiseKey: keys[index], direct: false), nowMs: now)
        }
        func lose(_ index: Int) {
            now += 1_000
            _ = gateway.handle(.peerLost(MeshPeerID(noisePublicKey: keys[index])), nowMs: now)
        }
        func watched() throws -> [Int] {
            try (0..<keys.count).filter { index in
                var probe = gateway
                _ = probe.handle(.drop(try Self.drop(Self.envelope(for: keys[index], at: now))), nowMs: now)
                return probe.counters.drops[.queued] == 1
            }
        }
        for index in 0..<4 { verify(index) }  // A B C D
        lose(2); lose(1); lose(3); verify(3)  // C then B lost; D lost and back
        verify(4)
        #expect(try watched() == [0, 1, 3, 4], "E took the place of C, lost longest ago")
        verify(5)
        #expect(try watched() == [0, 3, 4, 5], "F took B's")
        verify(0)  // A verified again: to the back
        verify(6)
        #expect(try watched() == [0, 4, 5, 6], "no peer lost: G took D's (back before E, F and A's new announce)")
        verify(7)
        #expect(try watched() == [0, 5, 6, 7], "H took E's")
        #expect(gateway.counters.watchOverflow == 0)
    }

    @Test("the watch list is bounded by its subscriptions: a flood of verified strangers takes the places of lost and indirect peers, never of direct ones")
    func watchBoundedUnderAFlood() throws {
        var gateway = Self.gateway { $0.maxSubscriptions = 2; $0.tagsPerFilter = 6 }  // 2 × 2 peers
        let phones = (1...2).map { [UInt8](repeating: UInt8($0), count: 32) }
        for key in phones { _ = gateway.handle(.peerVerified(MeshPeerID(noisePublicKey: key), noiseKey: key, direct: true), nowMs: Self.t0) }
        for index in 0..<50 {
            let key = SHA256.hash([UInt8(index)])
            _ = gateway.handle(.peerVerified(MeshPeerID(noisePublicKey: key), noiseKey: key, direct: false), nowMs: Self.t0 + UInt64(index))
        }
        #expect(gateway.watchedCount == 4 && gateway.counters.watchOverflow == 0)
        // The direct phones are still watched: a drop for one is taken.
        _ = gateway.handle(.drop(try Self.drop(Self.envelope(for: phones[0]))), nowMs: Self.t0 + 1_000)
        #expect(gateway.counters.drops[.queued] == 1)
        // Full of direct peers, a newcomer finds no place (counted).
        for key in (3...5).map({ [UInt8](repeating: UInt8($0), count: 32) }) {
            _ = gateway.handle(.peerVerified(MeshPeerID(noisePublicKey: key), noiseKey: key, direct: true), nowMs: Self.t0 + 2_000)
        }
        #expect(gateway.watchedCount == 4 && gateway.counters.watchOverflow == 1)
    }

    @Test("a chunk's backlog at the filter's limit is asked again up to its oldest drop, round after round, until a round brings less")
    func backfill() throws {
        var gateway = Self.gateway { $0.filterLimit = 3 }
        _ = gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: false), nowMs: Self.t0)
        _ = gateway.handle(.deadline, nowMs: Self.t0 + 5_000)
        func load(_ subscription: String, ages: [Int64]) throws {
            for age in ages {
                let event = try Self.drop(Self.envelope(for: Self.keyB), createdAt: Int64(Self.t0 / 1000) - age)
                _ = gateway.handle(.drop(event, subscription: subscription), nowMs: Self.t0 + 6_000)
            }
        }
        try load("courier-0", ages: [100, 50, 10])
        let first = gateway.handle(.endOfStored(subscription: "courier-0"), nowMs: Self.t0 + 6_000)
        guard case .subscribe("courier-0-older", let filter) = try #require(first.first) else { Issue.record("\(first)"); return }
        #expect(filter.until == Int64(Self.t0 / 1000) - 100 && filter.limit == 3 && filter.tags["x"]?.count == 3)
        try load("courier-0-older", ages: [300, 200, 150])
        let second = gateway.handle(.endOfStored(subscription: "courier-0-older"), nowMs: Self.t0 + 7_000)
        guard case .subscribe("courier-0-older", let again) = try #require(second.first) else { Issue.record("\(second)"); return }
        #expect(again.until == Int64(Self.t0 / 1000) - 300)
        try load("courier-0-older", ages: [400])
        #expect(gateway.handle(.endOfStored(subscription: "courier-0-older"), nowMs: Self.t0 + 8_000) == [.unsubscribe(id: "courier-0-older")])
        #expect(gateway.counters.backfills == 2 && gateway.counters.drops[.queued] == 7)
        // A load below the limit asks for nothing more.
        #expect(gateway.handle(.endOfStored(subscription: "courier-0"), nowMs: Self.t0 + 9_000).isEmpty)
    }

    @Test("at most 2 backfills are open at once (8 chunks + 2 = nostream's 10 subscriptions); a third chunk's waits and starts when one closes")
    func backfillsTakeTurns() throws {
        var gateway = Self.gateway { $0.filterLimit = 2; $0.tagsPerFilter = 3 }
        let keys = (0..<3).map { [UInt8](repeating: UInt8(0x30 + $0), count: 32) }
        for key in keys { _ = gateway.handle(.peerVerified(MeshPeerID(noisePublicKey: key), noiseKey: key, direct: false), nowMs: Self.t0) }
        #expect(Self.subscribed(gateway.handle(.deadline, nowMs: Self.t0 + 5_000)).count == 3)
        func full(_ chunk: Int, ages: [Int64] = [100, 50]) throws -> [CourierGateway.Action] {
            let subscription = "courier-\(chunk)"
            for age in ages {
                let event = try Self.drop(Self.envelope(for: keys[chunk]), createdAt: Int64(Self.t0 / 1000) - age)
                _ = gateway.handle(.drop(event, subscription: subscription), nowMs: Self.t0 + 6_000)
            }
            return gateway.handle(.endOfStored(subscription: subscription), nowMs: Self.t0 + 6_000)
        }
        #expect(Self.subscribed(try full(0)) == ["courier-0-older": 3])
        #expect(Self.subscribed(try full(1)) == ["courier-1-older": 3])
        #expect(try full(2).isEmpty, "two backfills are open: the third chunk's waits")
        // courier-0's backfill brings less than the limit: it closes, and courier-2's starts in its place.
        let closed = gateway.handle(.endOfStored(subscription: "courier-0-older"), nowMs: Self.t0 + 7_000)
        #expect(closed.first == .unsubscribe(id: "courier-0-older"))
        #expect(Self.subscribed(closed) == ["courier-2-older": 3])
        #expect(gateway.counters.backfills == 3)
    }

    @Test("a drop for a watched direct peer is queued, remembered and delivered byte-equal; again: nothing")
    func dropDelivered() throws {
        var gateway = Self.gateway()
        _ = gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: true), nowMs: Self.t0)
        let envelope = Self.envelope(for: Self.keyB, copies: 1)
        let event = try Self.drop(envelope)
        let actions = gateway.handle(.drop(event), nowMs: Self.t0 + 1_000)
        #expect(actions.contains(.rememberSeen(eventID: event.id.hex, atMs: Self.t0 + 1_000)))
        let delivery = try #require(Self.deliveries(actions).first)
        let bytes = try envelope.encode()
        #expect(delivery.0 == Self.phoneB && delivery.1 == bytes && delivery.2 == .pending(eventID: event.id.hex))
        #expect(gateway.handle(.delivered(delivery.2, ok: true), nowMs: Self.t0 + 1_100).contains(.removePending(eventID: event.id.hex)))
        #expect(gateway.handle(.drop(event), nowMs: Self.t0 + 2_000).isEmpty)
        // The same envelope under another drop (another courier parked it too): remembered as handed over.
        let other = try Self.drop(envelope)
        #expect(Self.deliveries(gateway.handle(.drop(other), nowMs: Self.t0 + 3_000)).isEmpty)
        #expect(gateway.counters.drops[.duplicate] == 2 && gateway.counters.deliveries[.delivered] == 1)
    }

    @Test("nothing for a mislabeled tag, an expired envelope, bad base64, a wrong expiration, an expiry beyond 25 h, a stranger")
    func dropRefusals() throws {
        var gateway = Self.gateway()
        _ = gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: true), nowMs: Self.t0)
        let good = Self.envelope(for: Self.keyB)
        let cases: [(NostrEvent, CourierDrop.Refusal)] = [
            (try Self.drop(good, x: Hex.encode([UInt8](repeating: 9, count: 16))), .tagMismatch),
            (try Self.drop(Self.envelope(for: Self.keyB, expiresIn: 0)), .expired),
            (try Self.drop(good, content: "not base64!"), .badBase64),
            (try Self.drop(good, expiration: String(good.expiryMs / 1000 + 60)), .expirationMismatch),
            (try Self.drop(Self.envelope(for: Self.keyB, expiresIn: 26 * 3_600_000)), .expiryTooFar),
            (try Self.drop(good, content: String(repeating: "A", count: 28_004)), .tooLarge),
        ]
        for (event, refusal) in cases {
            let actions = gateway.handle(.drop(event), nowMs: Self.t0 + 1_000)
            #expect(Self.deliveries(actions).isEmpty && gateway.counters.dropRefusals[refusal] == 1, "\(refusal)")
        }
        // A stranger's tag: not taken and not remembered, so the same event is taken once its peer is watched.
        let strangerKey = [UInt8](repeating: 0x55, count: 32)
        let stranger = try Self.drop(Self.envelope(for: strangerKey))
        #expect(gateway.handle(.drop(stranger), nowMs: Self.t0 + 1_000).isEmpty)
        #expect(gateway.counters.drops[.notWatched] == 1)
        _ = gateway.handle(.peerVerified(MeshPeerID(noisePublicKey: strangerKey), noiseKey: strangerKey, direct: true), nowMs: Self.t0 + 2_000)
        #expect(Self.deliveries(gateway.handle(.drop(stranger), nowMs: Self.t0 + 3_000)).count == 1)
    }

    @Test("not direct: the drop waits; delivered when the peer is direct; a failed send stays for the next time")
    func waitsForADirectPeer() throws {
        var gateway = Self.gateway()
        _ = gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: false), nowMs: Self.t0)
        let event = try Self.drop(Self.envelope(for: Self.keyB))
        #expect(Self.deliveries(gateway.handle(.drop(event), nowMs: Self.t0 + 1_000)).isEmpty && gateway.pendingCount == 1)
        let sent = Self.deliveries(gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: true), nowMs: Self.t0 + 2_000))
        #expect(sent.count == 1)
        _ = gateway.handle(.delivered(.pending(eventID: event.id.hex), ok: false), nowMs: Self.t0 + 2_100)
        _ = gateway.handle(.peerLost(Self.phoneB), nowMs: Self.t0 + 3_000)
        #expect(gateway.pendingCount == 1)
        #expect(Self.deliveries(gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: true), nowMs: Self.t0 + 60_000)).count == 1)
    }

    @Test("held mail is handed over when its recipient is a direct peer, as deposited (copies kept), then removed")
    func handover() throws {
        var gateway = Self.gateway()
        let envelope = Self.envelope(for: Self.keyB, copies: 4)
        _ = gateway.handle(.deposit(from: Self.phoneA, envelope: try envelope.encode()), nowMs: Self.t0)
        let actions = gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: true), nowMs: Self.t0 + 1_000)
        let delivery = try #require(Self.deliveries(actions).first)
        let bytes = try envelope.encode()
        #expect(delivery.0 == Self.phoneB && delivery.1 == bytes)
        guard case .held(let id) = delivery.2 else { Issue.record("\(delivery.2)"); return }
        #expect(gateway.handle(.delivered(delivery.2, ok: true), nowMs: Self.t0 + 1_100)
            == [.removeHeld(id), .rememberSeen(eventID: id, atMs: Self.t0 + 1_100)])
        #expect(gateway.heldCount == 0)
        // Our own drop of it comes back from the relay, or another courier's: not handed over twice.
        #expect(Self.deliveries(gateway.handle(.drop(try Self.drop(envelope)), nowMs: Self.t0 + 2_000)).isEmpty)
    }

    @Test("airtime: 6 deliveries a minute per peer, smallest first; the rest when the window reopens")
    func airtime() throws {
        var gateway = Self.gateway()
        _ = gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: false), nowMs: Self.t0)
        for size in (1...7).reversed() {
            _ = gateway.handle(.drop(try Self.drop(Self.envelope(for: Self.keyB, ciphertext: SecureRandom.bytes(size * 100)))), nowMs: Self.t0)
        }
        let sent = Self.deliveries(gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: true), nowMs: Self.t0 + 1_000))
        #expect(sent.count == 6 && sent.map(\.1.count) == sent.map(\.1.count).sorted())
        #expect(gateway.counters.airtimeWaits[.peerRate] == 1 && !gateway.waitsForSlots)
        _ = gateway.handle(.deadline, nowMs: Self.t0 + 5_000)  // the watch subscription
        #expect(gateway.nextDeadline() == Self.t0 + 61_000)
        for delivery in sent { _ = gateway.handle(.delivered(delivery.2, ok: true), nowMs: Self.t0 + 2_000) }
        #expect(Self.deliveries(gateway.handle(.deadline, nowMs: Self.t0 + 61_000)).count == 1)
    }

    @Test("the downlink schedule's slots: handovers stop at them, every phone's first mail before anyone's second; a wait is counted once per cap")
    func slots() throws {
        var gateway = Self.gateway()
        let keyC = [UInt8](repeating: 0x33, count: 32)
        let phoneC = MeshPeerID(noisePublicKey: keyC)
        for (peer, key) in [(Self.phoneB, Self.keyB), (phoneC, keyC)] {
            _ = gateway.handle(.peerVerified(peer, noiseKey: key, direct: false), nowMs: Self.t0)
            for size in 1...3 {
                _ = gateway.handle(.drop(try Self.drop(Self.envelope(for: key, ciphertext: SecureRandom.bytes(size * 100)))), nowMs: Self.t0)
            }
        }
        _ = gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: true), nowMs: Self.t0 + 1_000, slots: 0)
        #expect(gateway.waitsForSlots && gateway.counters.airtimeWaits[.downlinkBudget] == 1)
        let first = Self.deliveries(gateway.handle(.peerVerified(phoneC, noiseKey: keyC, direct: true), nowMs: Self.t0 + 2_000, slots: 3))
        #expect(first.map(\.0) == [Self.phoneB, phoneC].sorted() + [[Self.phoneB, phoneC].min()!], "one each, then the second of one")
        #expect(first.map(\.1.count).prefix(2).allSatisfy { $0 < first[2].1.count }, "each phone's smallest first")
        #expect(gateway.waitsForSlots && gateway.counters.airtimeWaits[.downlinkBudget] == 1, "still the same wait")
        let rest = Self.deliveries(gateway.handle(.deadline, nowMs: Self.t0 + 3_000, slots: 10))
        #expect(rest.count == 3 && !gateway.waitsForSlots)
        // Held back again later: a new wait.
        _ = gateway.handle(.drop(try Self.drop(Self.envelope(for: Self.keyB))), nowMs: Self.t0 + 4_000, slots: 0)
        #expect(gateway.counters.airtimeWaits[.downlinkBudget] == 2 && gateway.counters.airtimeWaits[.peerRate] == 0)
    }

    @Test("taken drops are remembered across a restart: the relay's re-send delivers nothing twice")
    func restartRemembers() throws {
        var gateway = Self.gateway()
        _ = gateway.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: true), nowMs: Self.t0)
        let event = try Self.drop(Self.envelope(for: Self.keyB))
        var seen: [(String, UInt64)] = []
        for action in gateway.handle(.drop(event), nowMs: Self.t0) {
            if case .rememberSeen(let id, let at) = action { seen.append((id, at)) }
        }
        var restarted = Self.gateway(restored: .init(seen: seen.map { (id: $0.0, atMs: $0.1) }))
        _ = restarted.handle(.peerVerified(Self.phoneB, noiseKey: Self.keyB, direct: true), nowMs: Self.t0 + 5_000)
        #expect(restarted.handle(.drop(event), nowMs: Self.t0 + 6_000).isEmpty)
        // 24 h later the id is forgotten (and the envelope long expired).
        _ = restarted.handle(.deadline, nowMs: Self.t0 + 86_400_000)
        #expect(restarted.handle(.drop(event), nowMs: Self.t0 + 86_400_001).allSatisfy { if case .deliver = $0 { false } else { true } })
    }
}
