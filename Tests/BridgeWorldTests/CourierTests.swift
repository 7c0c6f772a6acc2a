import BitchatWire
import BotCrypto
import BotSupport
import BridgeApp
import BridgeCore
import BridgeTesting
import Nostr
import Testing

/// The courier gateway in the in-process world (issue 24): phones on one segment, a bridge, a relay reached through
/// the real pool code (the bridge's courier relays are its operator relay here: relay_directory off).
@Suite("World: courier gateway")
struct CourierWorldTests {
    static func envelope(for noiseKey: [UInt8], site: Site, copies: UInt8 = 4) -> CourierEnvelope {
        let now = site.time.nowMs()
        return CourierEnvelope(
            recipientTag: CourierTag.tag(noiseKey: noiseKey, day: CourierTag.day(unixSeconds: Int64(now / 1000))),
            expiryMs: now + 3_600_000, ciphertext: SecureRandom.bytes(300), copies: copies)
    }

    /// A drop as another gateway (or a phone's own app) parks it: kind 1401 under a key used once (COURIER.md §3.1).
    static func drop(_ envelope: CourierEnvelope, site: Site) throws -> NostrEvent {
        let key = try SchnorrSecretKey(bytes: SecureRandom.bytes(32))
        return try UnsignedEvent(
            pubkey: key.publicKey, createdAt: Int64(site.time.nowMs() / 1000), kind: 1401,
            tags: [["x", Hex.encode(envelope.recipientTag)], ["expiration", String(envelope.expiryMs / 1000)]],
            content: Base64.encode(try envelope.withCopies(1).encode())
        ).signed(with: key)
    }

    /// `phone`'s recipient tag for today, in hex.
    static func tag(of phone: TestPhone, site: Site) -> String {
        Hex.encode(CourierTag.tag(noiseKey: phone.noiseKey.publicKey, day: CourierTag.day(unixSeconds: Int64(site.time.nowMs() / 1000))))
    }

    /// Whether the bridge's subscriptions on `relay` come to ask for `tag` (after the watch's debounce).
    static func watches(_ tag: String, relay: LoopbackRelay, site: Site) async -> Bool {
        await site.advance(until: { await relay.subscription(within: 0.05) { $0.filters.contains { $0.tags["x"]?.contains(tag) == true } } != nil })
    }

    @Test("a deposit becomes a drop; a drop for a verified phone is handed over once, byte-equal, and not again after a restart; held mail kept across it goes to its recipient when she arrives; /metrics counts it")
    func roundTrip() async throws {
        let site = Site(name: "courier")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("bridge", relays: [relay], segments: [air])
        let alice = await site.phone("alice", on: [air])
        let bob = await site.phone("bob", on: [air])
        #expect(await alice.meets(bridge))
        #expect(await bob.meets(bridge))
        let bridgeID = await bridge.peerID

        // Alice deposits mail for Carol, who is not here: published at once as a drop under a fresh key.
        let carol = X25519PrivateKey.generate()
        let forCarol = Self.envelope(for: carol.publicKey, site: site)
        await alice.depositCourier(try forCarol.encode(), to: bridgeID)
        let published = try #require(await relay.waitForEvent { $0.kind == 1401 }, "a drop on the relay")
        #expect(published.tags == [["x", Hex.encode(forCarol.recipientTag)], ["expiration", String(forCarol.expiryMs / 1000)]])
        #expect(try CourierEnvelope.decode(try Base64.decode(published.content)) == forCarol.withCopies(1), "copies forced to 1")
        let keys = try bridge.keys()
        #expect(published.pubkey != (try bridge.channelKey()).publicKey && published.pubkey.bytes != keys.noiseKey.publicKey)

        // Bob's tags are watched (after the subscription's debounce); a drop for him is handed over once, byte-equal.
        let bobsTag = Self.tag(of: bob, site: site)
        #expect(await Self.watches(bobsTag, relay: relay, site: site), "the bridge watches Bob's tag")
        let forBob = Self.envelope(for: bob.noiseKey.publicKey, site: site, copies: 1)
        let dropForBob = try Self.drop(forBob, site: site)
        relay.post(dropForBob)
        let bytes = try forBob.encode()
        // Handed over once the bridge knows Bob as a direct peer: at the latest his next announce (iOS: 15 s ± 4), when
        // his first verified announce reached it relayed.
        #expect(await site.advance(until: { await bob.gotCourierMail(bytes, from: bridgeID, within: 0.05) }, limit: 30_000), "Bob got his mail")
        let before = await bridge.runtime.metricsText()
        for line in [
            "bitchat_bridge_courier_deposits_total{outcome=\"accepted\"} 1", "bitchat_bridge_courier_drops_total{outcome=\"queued\"} 1",
            "bitchat_bridge_courier_publishes_total{outcome=\"confirmed\"} 1", "bitchat_bridge_courier_deliveries_total{outcome=\"delivered\"} 1",
            "bitchat_bridge_courier_mail{state=\"held\"} 1", "bitchat_bridge_courier_mail{state=\"pending\"} 0",
        ] {
            #expect(before.contains(line), "\(line)")
        }

        // The bridge restarts and the relay sends its backlog again (the pool's own dedup is gone with the process): the
        // drop is remembered on disk, nothing more for Bob.
        try await bridge.restart()
        #expect(await site.advance(until: {
            (try? await bridge.metrics().value("bitchat_bridge_courier_drops_total", labels: [.init("outcome", "duplicate")])) == 1
        }, limit: 30_000), "the re-sent drop was seen before")
        await site.advance(by: 20_000)
        #expect(bob.courierMail.count == 1)

        // Carol arrives: the held envelope is handed to her as deposited (copies 4 kept).
        let carolPhone = await site.phone("carol", on: [air], noiseKey: carol)
        let held = try forCarol.encode()
        #expect(await site.advance(until: { await carolPhone.gotCourierMail(held, from: bridgeID, within: 0.05) }, limit: 30_000),
                "Carol got hers")

        // After the restart (counters start again): the held envelope came back from the store and went to Carol.
        let metrics = await bridge.runtime.metricsText()
        for line in [
            "bitchat_bridge_courier_drops_total{outcome=\"duplicate\"} 1", "bitchat_bridge_courier_deliveries_total{outcome=\"delivered\"} 1",
            "bitchat_bridge_courier_mail{state=\"held\"} 0", "bitchat_bridge_courier_mail{state=\"pending\"} 0",
        ] {
            #expect(metrics.contains(line), "\(line)")
        }
        let watched = try #require(try await bridge.metrics().value("bitchat_bridge_courier_watched_peers"))
        #expect(watched >= 3, "alice, bob, carol: \(watched)")
        for secret in [bobsTag, Hex.encode(forCarol.recipientTag), published.content, dropForBob.id.hex] {
            #expect(!metrics.contains(secret), "no tag, content or event id on /metrics")
            #expect(!bridge.log.lines.all.contains { $0.jsonLine.contains(secret) }, "nor in the log")
        }
        await site.stop()
    }

    @Test("a handover takes its slot from the one paced downlink schedule: behind a chat backlog Bob's mail waits (counted on /metrics) only for the next token, ahead of the chat still queued")
    func sharesTheDownlinkBudget() async throws {
        let site = Site(name: "courier-budget")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("bridge", relays: [relay], segments: [air])
        let bob = await site.phone("bob", on: [air])
        #expect(await bob.meets(bridge))
        let bridgeID = await bridge.peerID
        #expect(await Self.watches(Self.tag(of: bob, site: site), relay: relay, site: site), "the bridge watches Bob's tag")
        // Bob is a direct peer by his next announce (iOS: 15 s ± 4); then the chat: 40 lines, 80 forms with the mirror,
        // against 30 broadcasts a minute, one every 2.1 s (lines under 16 characters: the spam filter's copy rule leaves
        // them alone).
        await site.advance(by: 20_000)
        for index in 0..<40 { try site.poster("poster \(index)").post("at gate \(index)", to: relay) }
        @Sendable func forms() async -> Double {
            let metrics = try? await bridge.metrics()
            return ["gateway", "mirror"].reduce(0) { $0 + (metrics?.value("bitchat_bridge_downlink_forms_total", labels: [.init("queue", $1)]) ?? 0) }
        }
        #expect(await site.advance(until: { await forms() >= 4 }), "chat is going out, paced")

        let forBob = Self.envelope(for: bob.noiseKey.publicKey, site: site, copies: 1)
        relay.post(try Self.drop(forBob, site: site))
        let bytes = try forBob.encode()
        #expect(await site.advance(until: {
            (try? await bridge.metrics().value("bitchat_bridge_courier_airtime_waits_total", labels: [.init("cap", "downlink_budget")])) == 1
        }, limit: 30_000), "the mail waits for a slot")
        let waitedFrom = site.time.nowMs()
        #expect(await site.advance(until: { await bob.gotCourierMail(bytes, from: bridgeID, within: 0.05) }, limit: 20_000, step: 100),
                "Bob got his mail")
        let waited = site.time.nowMs() - waitedFrom
        let chatBeforeIt = await forms()
        // Its floor (3 a minute ahead of ready chat) gives it the next token: within about 2 s, while 70-odd chat forms
        // still wait.
        #expect(waited <= 3_000, "the next token: \(waited) ms")
        #expect(chatBeforeIt < 20, "ahead of the chat still queued: \(chatBeforeIt) forms had gone")
        let metrics = await bridge.runtime.metricsText()
        #expect(metrics.contains("bitchat_bridge_courier_deliveries_total{outcome=\"delivered\"} 1"))
        #expect(metrics.contains("bitchat_bridge_courier_airtime_waits_total{cap=\"downlink_budget\"} 1"))
        await site.stop()
    }

    @Test("a relay that refuses large filters (CLOSED past 50 tag values): the bridge halves its chunks down to iOS's 48 tags, logs it, and every phone is watched and gets its mail; /metrics shows the chunk")
    func refusedFiltersGetSmaller() async throws {
        let site = Site(name: "courier-filters")
        let relay = try site.relay()
        relay.setMaxFilterValues(50)
        let air = site.segment()
        let bridge = try await site.bridge("bridge", relays: [relay], segments: [air])
        var phones: [TestPhone] = []
        for index in 0..<17 { phones.append(await site.phone("phone \(index)", on: [air])) }
        let tags = phones.map { Self.tag(of: $0, site: site) }
        // 17 phones are 51 tags: one chunk of 300, 150 or 75 is refused; at 48 they are 16 phones and 1.
        #expect(await site.advance(until: {
            (try? await bridge.metrics().value("bitchat_bridge_courier_filter_tags")) == 48
        }, limit: 90_000, step: 500), "the chunks came down to 48 tags")
        #expect(await site.advance(until: {
            var latest: [String: [String]] = [:]
            for request in relay.subscriptions.all where request.id.hasPrefix("courier-") {
                latest[request.id] = request.filters.flatMap { $0.tags["x"] ?? [] }
            }
            return Set(tags).isSubset(of: Set(latest.values.flatMap { $0 })) && latest.values.allSatisfy { $0.count <= 48 }
        }, limit: 30_000, step: 500), "every phone's tags in subscriptions the relay took")
        let smaller = bridge.log.lines.all.filter { $0.jsonLine.contains("courier filters made smaller") }
        #expect((1...3).contains(smaller.count), "one warning per halving: \(smaller.count)")
        #expect(try await bridge.metrics().value("bitchat_bridge_courier_watched_peers") == 17)

        let last = try #require(phones.last)
        let mail = Self.envelope(for: last.noiseKey.publicKey, site: site, copies: 1)
        relay.post(try Self.drop(mail, site: site))
        #expect(await site.advance(until: { await last.gotCourierMail(try! mail.encode(), from: await bridge.peerID, within: 0.05) }, limit: 30_000, step: 1_000),
                "the mail of a phone in the second chunk")
        await site.stop()
    }
}
