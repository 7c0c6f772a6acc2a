import BitchatWire
import BotCrypto
import Bridge
import BridgeApp
import BridgeCore
import BridgeTesting
import Mesh
import Nostr
import SpamFilter
import Testing

/// Nostr → mesh in the in-process world: the channel's lines onto the air, once, for both kinds of phone.
@Suite("World: channel downlink")
struct DownlinkTests {
    @Test("a channel event reaches a phone as one fromGateway carrier after the hold, signed by the bridge's announced key")
    func channelEventReachesThePhone() async throws {
        let site = Site(name: "downlink")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("gateway", relays: [relay], segments: [air])
        let phone = await site.phone("reader", on: [air])
        #expect(await phone.knows(await bridge.peerID))
        let event = try site.poster("alice").post("hello from the internet", to: relay)
        #expect(await bridge.verdict(on: event.id.hex)?.kind == .passed)
        #expect(await site.advance(until: { await phone.heard(carriers: [event.id]) }))
        let carrier = try #require(await phone.carrier(of: event.id))
        #expect(carrier.payload.direction == .fromGateway && carrier.packetSigned)
        #expect(phone.carriers(of: event.id).count == 1)
        await site.stop()
    }

    @Test("every served level: a post on a parent level and on a block child reaches the mesh with its own geohash, once; a neighbouring cell never crosses; an iPhone viewing each level sees exactly that level's line")
    func servedLevels() async throws {
        let site = Site(name: "levels")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("gateway", relays: [relay], segments: [air])
        let phone = await site.phone("reader", on: [air])
        #expect(await phone.knows(await bridge.peerID))
        let levels = ["u4", "u4pr", "u4pru", "u4pruy", "u4pruy7"]
        var ids: [String: EventID] = [:]
        for level in levels { ids[level] = try site.poster("at-\(level)").post("level \(level)", geohash: level, to: relay).id }
        let neighbour = try site.poster("next-door").post("next cell", geohash: "u4pruz", to: relay)
        for id in ids.values { #expect(await bridge.verdict(on: id.hex)?.kind == .passed) }
        #expect(await site.advance(until: { await phone.heard(carriers: Array(ids.values)) }))
        for (level, id) in ids {
            let carrier = await phone.carrier(of: id)
            #expect(carrier?.payload.geohash == level && phone.carriers(of: id).count == 1, "\(level)")
        }
        #expect(phone.carriers(of: neighbour.id).isEmpty)
        let heard = phone.heard.all.compactMap { if case .carrier(let carrier) = $0 { carrier } else { nil } }
        #expect(!heard.isEmpty && heard.allSatisfy(\.packetSigned), "every broadcast carrier verifies under the announced key")
        for level in levels {
            let shown = heard.filter { phone.shows($0, viewing: level) && $0.payload.direction == .fromGateway }
            #expect(shown.count == 1 && TestPhoneTests.id(of: shown[0]) == ids[level], "an iPhone viewing \(level)")
        }
        await site.stop()
    }

    /// The reach issue, part 2: a phone without carrier support (Android main: `BinaryProtocol.kt` has no type 0x28)
    /// sees the channel as mesh lines, one persona per author, none hidden by its own per-sender filter (the ported
    /// spam filter, `../shared/seeds/spam-filter-pr.txt`: burst 6, then 1 per 10 s), where one mirror identity for
    /// everyone would lose half of them.
    @Test("by default each channel line reaches an Android phone once, from its author's persona, and none is hidden by the phone's own per-sender limits; an iPhone also gets each once as a carrier")
    func androidSeesTheChannel() async throws {
        let site = Site(name: "android")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("gateway", relays: [relay], segments: [air])
        let iphone = await site.phone("reader", on: [air])
        let android = await site.phone("android", on: [air], app: .android)
        #expect(await iphone.knows(await bridge.peerID))
        #expect(await android.knows(await bridge.peerID))
        let lines = [
            "alice": ["gates open at six", "bring water, it is hot"], "bob": ["the food trucks are by the lake", "lost a blue jacket"],
            "carol": ["who plays after midnight?", "meet at the big tree"], "dave": ["stage two is running late", "free refills at the bar"],
            "erin": ["my phone battery is dying", "anyone seen a red tent"], "frank": ["sunrise set was amazing", "parking lot C is full"],
        ]
        var posted: [(event: NostrEvent, author: String)] = []
        for author in lines.keys.sorted() {
            for text in lines[author]! { posted.append((try site.poster(author).post(text, to: relay), author)) }
        }
        for line in posted { #expect(await bridge.verdict(on: line.event.id.hex)?.kind == .passed) }
        #expect(await site.advance(until: { await android.heard(texts: posted.map(\.event.content)) }, limit: 90_000))
        for line in posted {
            #expect(await android.heard.first { if case .publicMessage(let m) = $0 { m.text == line.event.content } else { false } } != nil)
            let copies = android.messages(line.event.content)
            #expect(copies.count == 1 && copies.first?.nickname == "\(line.author)@nostr", "\(line.event.content): \(copies.count) copies")
            #expect(iphone.carriers(of: line.event.id).count == 1, "\(line.event.content) as a carrier")
        }
        #expect(!android.heard.all.contains { if case .carrier(let c) = $0 { android.shows(c, viewing: "u4pruy") } else { false } })
        let received = posted.flatMap { android.messages($0.event.content) }
        let personas = Dictionary(grouping: received, by: \.nickname).mapValues { Set($0.map(\.sender)) }
        #expect(personas.count == lines.count && personas.values.allSatisfy { $0.count == 1 }, "one persona per author")
        func hidden(_ sender: (MeshPublicMessage) -> String) -> Int {
            var filter = AdmissionPolicy(config: SpamFilterConfig())
            return received.sorted { $0.timestamp < $1.timestamp }.filter { line in
                let candidate = SpamCandidate(
                    senderKey: sender(line), messageID: line.stableID, timestamp: Double(line.timestamp) / 1000, content: .text(line.text),
                    direction: .nostrToMesh)
                return filter.judge(candidate, now: Double(line.timestamp) / 1000).isHidden
            }.count
        }
        #expect(hidden { $0.sender.hex } == 0)
        let single = hidden { _ in "one mirror identity" }
        #expect(single > 0, "one sender: \(single) of \(posted.count) hidden by the phone")
        await site.stop()
    }

    @Test("the gateway sends channel presence to the relay: kind 20001, tags exactly [[g, geohash]], empty content, its channel key")
    func channelPresence() async throws {
        let site = Site(name: "presence")
        let relay = try site.relay()
        let bridge = try await site.bridge("gateway", relays: [relay], segments: [site.segment()])
        // (With the rendezvous role on too, as by default, an `r` presence goes out beside it.)
        @Sendable func channelPresence(_ event: NostrEvent) -> Bool { event.kind == NostrKind.presence && event.tags.first?.first == "g" }
        let presence = try #require(await relay.waitForEvent(channelPresence))
        #expect(presence.tags == [["g", "u4pruy"]] && presence.content.isEmpty)
        let keys = try bridge.channelKey()
        #expect(presence.pubkey == keys.publicKey)
        // The next one comes 40–80 s later (the phones' own cadence), not before.
        await site.advance(by: 39_000)
        #expect(relay.events.filter(channelPresence).count == 1)
        await site.advance(by: 42_000)
        #expect(await relay.stored.count(2, where: channelPresence).count == 2)
        await site.stop()
    }
}

enum TestPhoneTests {
    static func id(of carrier: MeshCarrier) -> EventID? {
        (try? UnverifiedEvent(json: String(decoding: carrier.payload.eventJSON, as: UTF8.self)))?.claimedID
    }
}
