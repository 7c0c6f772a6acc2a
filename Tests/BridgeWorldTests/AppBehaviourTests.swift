import AppModels
import BitchatWire
import BotCrypto
import BotSupport
import BridgeCore
import BridgeTesting
import Geohash
import Mesh
import MeshRuntime
import Nostr
import Testing

/// Issue 33: the bridge as the apps' own code treats it (``AppPhoneModel``, written from the iOS and Android sources,
/// APP-BEHAVIOUR.md): a phone alone with the bridge on a BLE link keeps the bridge as the link's owner through the
/// channel's personas, takes its sync requests and replies, sends none of the bridge's own packets back, shows every
/// mirrored line under its author's name, and a late phone gets no message without its sender's announce.
@Suite("World: as the apps' code treats the bridge")
struct AppBehaviourTests {
    /// A channel author: a key derived from `name`, its events signed with it; `nickname` nil posts without an `n` tag.
    struct Author {
        let key: SchnorrSecretKey
        let nickname: String?

        init(_ seed: String, nickname: String?) throws {
            key = try SchnorrSecretKey(bytes: SHA256.hash(utf8: "author " + seed))
            self.nickname = nickname
        }

        /// Posts `text` and waits until `bridge` judged it (the relay's socket runs on real time).
        func post(_ text: String, at site: Site, to relay: LoopbackRelay, judgedBy bridge: TestBridge) async throws {
            let tags = [["g", "u4pruy"]] + (nickname.map { [["n", $0]] } ?? [])
            let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: Int64(site.now), kind: NostrKind.ephemeralChat, tags: tags, content: text)
            let event = try NostrPoW.mine(unsigned, target: 8).event.signed(with: key)
            relay.post(event)
            #expect(await bridge.verdict(on: event.id.hex)?.kind == .passed, "\(text) passed")
        }
    }

    /// Lines unlike one another (the spam filter's cross-user copy rule has no reason to hide any): six words each from
    /// a vocabulary, drawn by a seeded generator.
    static func lines(_ count: Int, seed: UInt64) -> [String] {
        let words = ("stage tent gate bar water shuttle river field lamp flag drum guitar crowd dance sunset rain mud boots tea " +
            "coffee pizza noodles train ticket wristband camp fire light tower bridge north south east west friend sister " +
            "brother tall blue red green yellow quiet loud early late tonight morning noon midnight lost found keys phone " +
            "charger map seven nine ten eleven queue bus taxi bike parking shade sunscreen poncho blanket").split(separator: " ")
        var random = SeededRandom(seed: seed)
        return (0..<count).map { i in (0..<6).map { _ in String(words[Int(random.next() % UInt64(words.count))]) }.joined(separator: " ") + " \(i)" }
    }

    /// The bridge alone with one app phone on a BLE link (gateway only, the text mirror on as shipped).
    static func world(_ name: String, app: AppPhoneModel.App) async throws -> (Site, LoopbackRelay, TestBridge, AppPhone, MeshPeerID) {
        let site = Site(name: name)
        let relay = try site.relay()
        let link = site.bleLink()
        let bridge = try await site.bridge(
            "bridge", relays: [relay], segments: [link], settings: ["BRIDGE_RENDEZVOUS": "off", "BRIDGE_CHANNEL_LEVELS": "none"])
        let phone = await site.appPhone("phone", app, on: [link])
        let bridgeID = await bridge.peerID
        #expect(await site.advance(until: { await phone.model.owner(of: MeshLinkID(1)) == bridgeID }), "the phone binds its link to the bridge")
        return (site, relay, bridge, phone, bridgeID)
    }

    /// The IDs that are the bridge's own on the mesh: itself and every persona the phone met (`…@nostr`).
    static func bridgeSenders(_ model: AppPhoneModel, bridge: MeshPeerID) -> Set<MeshPeerID> {
        Set(model.report.shown.filter { $0.name.contains("@nostr") }.map(\.sender)).union([bridge])
    }

    @Test("an iPhone keeps the bridge bound to its link through 20 channel authors' personas, takes its REQUEST_SYNCs and sync replies throughout, and sends none of the bridge's own packets back")
    func iPhoneKeepsTheBridge() async throws {
        let (site, relay, bridge, phone, bridgeID) = try await Self.world("ios-link", app: .iOS)
        let authors = try (0..<20).map { try Author("ios \($0)", nickname: "fan\($0)") }
        let texts = Self.lines(2 * authors.count, seed: 33)
        var lines = 0
        for _ in 0..<2 {
            for author in authors {
                try await author.post(texts[lines], at: site, to: relay, judgedBy: bridge)
                lines += 1
                await site.advance(by: 5_000)
            }
        }
        // Time for the last lines' holds and the minute's budget, and for a few more sync rounds both ways.
        let allShown = await site.advance(until: { await phone.model.report.shown.count >= lines }, limit: 120_000, step: 500)
        let shownCount = await phone.model.report.shown.count
        #expect(allShown, "every channel line shown (\(shownCount) of \(lines))")
        await site.advance(by: 60_000, step: 500)

        let model = await phone.model
        #expect(model.owner(of: MeshLinkID(1)) == bridgeID, "the link still belongs to the bridge")
        let takeovers = model.report.events.filter { if case .linkOwner(_, let owner) = $0 { owner != bridgeID } else { false } }
        #expect(takeovers.isEmpty, "no persona took the bridge's link: \(takeovers.count) takeovers")
        #expect(!model.report.events.contains(.disconnected(bridgeID)), "the bridge was never retired")
        #expect(model.report.drops[.directSenderMismatch] == 0, "the bridge's REQUEST_SYNCs were taken")
        #expect(model.report.drops[.invalidRSR] == 0, "the bridge's sync replies were taken")
        #expect((model.report.answered[bridgeID] ?? 0) >= 8, "the phone answered the bridge's rounds: \(model.report.answered[bridgeID] ?? 0)")
        let own = Self.bridgeSenders(model, bridge: bridgeID)
        #expect(own.count == 21, "the bridge and 20 personas: \(own.count)")
        let echoes = model.report.replies.filter { $0.requester == bridgeID && own.contains($0.sender) }
        #expect(echoes.isEmpty, "the phone sent back \(echoes.count) of the bridge's own packets")
        // The iPhone asks five times at once every other round: the bridge answered two at once and paced the rest.
        let metrics = try await bridge.metrics()
        #expect(metrics.total("bitchat_bridge_sync_requests_total") { $0["outcome"] == "deferred" } >= 3)
        #expect(metrics.total("bitchat_bridge_sync_requests_total") { $0["outcome"] == "link_busy" } == 0)
        #expect(metrics.total("bitchat_bridge_mesh_link_bindings_total") { $0["event"] == "bound" } == 1)
        await site.stop()
    }

    @Test("the bridge advertises only what it implements: gateway, bridge (with its cell) and board; not the courier acks of iOS PR #1438")
    func advertisesWhatItImplements() async throws {
        let site = Site(name: "caps")
        let relay = try site.relay()
        let air = site.segment()
        let both = try await site.bridge("both", relays: [relay], segments: [air])
        let gatewayOnly = try await site.bridge("gateway", relays: [relay], segments: [air], settings: ["BRIDGE_RENDEZVOUS": "off"])
        let phone = await site.phone("phone", on: [air])
        let cases: [(TestBridge, PeerCapabilities)] = [(both, [.gateway, .bridge, .board]), (gatewayOnly, [.gateway, .board])]
        for (bridge, expected) in cases {
            let id = await bridge.peerID
            #expect(await phone.knows(id))
            let peer = await phone.node.peers[id]
            let names = peer?.capabilities?.names ?? []
            #expect(peer?.capabilities == expected, "\(bridge.name): \(names)")
            #expect((peer?.bridgeGeohash != nil) == expected.contains(.bridge))
        }
        await site.stop()
    }

    @Test("a late iPhone gets no message without its sender's announce, and shows what the bridge serves")
    func latePhoneGetsNoOrphans() async throws {
        let site = Site(name: "late")
        let relay = try site.relay()
        let island = site.segment()
        let link = site.bleLink()
        let bridge = try await site.bridge(
            "bridge", relays: [relay], segments: [island, link], settings: ["BRIDGE_RENDEZVOUS": "off", "BRIDGE_CHANNEL_LEVELS": "none"])
        var late: AppPhone?
        // Every step waits on the world — the bridge's inbound and its work, then the late phone's inbound — so the
        // clock never runs past frames on their way: a persona's line aired minutes late (by the clock) reached the late
        // phone without its announce, and a sync reply landing after its request's 30 s window was dropped (invalid RSR)
        // while the rest of it, landing after the next request, passed without its announce (~1 run in 60 alone).
        func settled() async -> Int {
            await bridge.transport.events.drained()
            _ = try? await bridge.metrics()
            guard let late else { return 0 }
            await late.drained()
            return await late.model.report.shown.count
        }
        func advance(by ms: UInt64, step: UInt64 = 250) async {
            _ = await site.advance(until: { _ = await settled(); return false }, limit: ms, step: step)
        }
        // A phone says three lines and goes (no leave: it walked out of range); a channel author says two.
        let early = await site.phone("early", on: [island])
        #expect(await early.meets(bridge))
        var said: [String] = []
        for text in ["meet at the big tree", "the bar is open again", "anyone got a lighter"] {
            said.append(await early.say(text))
            #expect(await bridge.verdict(on: said.last!)?.kind == .passed)
            await advance(by: 2_000)
        }
        await early.leave()
        let author = try Author("late", nickname: "dj")
        for text in ["doors open at nine tonight", "the headliner starts in ten minutes"] {
            try await author.post(text, at: site, to: relay, judgedBy: bridge)
            await advance(by: 15_000)
        }
        // Past the 60 s the apps keep an announce for sync, but within what they accept (iOS 900 s, Android 600 s).
        await advance(by: 120_000, step: 500)
        let phone = await site.appPhone("late", .iOS, on: [link])
        late = phone
        let bridgeID = await bridge.peerID
        _ = await site.advance(until: { await settled() >= 5 }, limit: 40_000, step: 250)
        await advance(by: 5_000)
        #expect(await phone.model.owner(of: MeshLinkID(1)) == bridgeID)
        let model = await phone.model
        #expect(model.report.drops[.unverifiedMessage] == 0, "messages served without their sender's announce: \(model.report.drops[.unverifiedMessage]) \(model.report.dropped) shown \(model.report.shown.map(\.name)) \(model.report.drops)")
        let shown = Set(model.report.shown.map(\.stableID))
        let sync = (try? await bridge.metrics()).map { m in m.families.filter { $0.name.contains("sync") }.flatMap { f in f.samples.map { "\(f.name)\($0.labels.map(\.value)) \($0.value)" } } } ?? []
        let diagnosis = "drops \(model.report.drops) requests \(model.report.requestsSent.map { "\($0.types)" }) events \(model.report.events) bridge \(sync)"
        for id in said { #expect(shown.contains(id), "the early phone's line \(id) reached the late phone by sync; \(diagnosis)") }
        #expect(model.report.shown.filter { $0.name.hasPrefix("dj") }.count == 2, "the channel author's two lines, under its name")
        await site.stop()
    }

    @Test("an Android phone shows every persona line under its author's name through 5 minutes of channel traffic and keeps the bridge as its direct peer")
    func androidShowsEveryPersonaLine() async throws {
        let (site, relay, bridge, phone, bridgeID) = try await Self.world("android-link", app: .android)
        // Ten authors, two of them named alike and two without a name: names must not collide on the mesh.
        let authors = try [
            Author("a0", nickname: "sam"), Author("a1", nickname: "sam"), Author("a2", nickname: nil), Author("a3", nickname: nil),
            Author("a4", nickname: "phone"), Author("a5", nickname: "bridge"), Author("a6", nickname: "kim"), Author("a7", nickname: "lee"),
            Author("a8", nickname: "ana"), Author("a9", nickname: "bo"),
        ]
        var posted: [(author: Int, text: String)] = []
        let texts = Self.lines(5 * authors.count, seed: 34)
        for _ in 0..<5 {
            for (i, author) in authors.enumerated() {
                let text = texts[posted.count]
                try await author.post(text, at: site, to: relay, judgedBy: bridge)
                posted.append((i, text))
                await site.advance(by: 6_000)
            }
        }
        let allShown = await site.advance(until: { await phone.model.report.shown.count >= posted.count }, limit: 120_000, step: 500)
        let shownCount = await phone.model.report.shown.count
        #expect(allShown, "every line shown (\(shownCount) of \(posted.count))")
        let model = await phone.model
        var names: [Int: Set<String>] = [:]
        for (author, text) in posted {
            let shown = model.report.shown.filter { $0.text == text }
            #expect(shown.count == 1, "\"\(text)\" shown \(shown.count) times")
            if let name = shown.first?.name { names[author, default: []].insert(name) }
        }
        for (i, author) in authors.enumerated() {
            let seen = names[i] ?? []
            #expect(seen.count == 1, "author \(i)'s lines under one name: \(seen.sorted())")
            #expect(seen.allSatisfy { $0.hasPrefix(author.nickname ?? "anon") && $0.contains("@nostr") }, "author \(i) shown as \(seen.sorted())")
        }
        let allNames = names.values.compactMap(\.first)
        #expect(Set(allNames).count == authors.count, "every author under a name of its own: \(allNames.sorted())")
        #expect(!allNames.contains("phone"), "no persona takes the phone user's own name")
        #expect(model.owner(of: MeshLinkID(1)) == bridgeID, "the bridge is still the phone's direct peer")
        let takeovers = model.report.events.filter { if case .linkOwner(_, let owner) = $0 { owner != bridgeID } else { false } }
        #expect(takeovers.isEmpty, "no persona took the link: \(takeovers.count) takeovers")
        #expect(model.report.drops[.unroutable] == 0, "every sync answer and request could be sent")
        await site.stop()
    }

    /// APP-BEHAVIOUR §5: Android `main` matches Nostr tags case-sensitively. Every tag name the bridge writes — on the
    /// events it publishes and in the filters it subscribes with — is lowercase, and so are the values filters match
    /// on (geohashes, hex keys and ids); a nickname (`n`) or text stays as written. A geohash is taken in lowercase
    /// only (`GeohashCell` refuses `U4PRUY`), so no uppercase value can reach a tag.
    @Test("every tag the bridge publishes or subscribes with is lowercase, with lowercase g, r, x, e and p values")
    func lowercaseTags() async throws {
        let site = Site(name: "tags")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("bridge", relays: [relay], segments: [air], settings: ["BRIDGE_TEXT_MIRROR": "both"])
        let phone = await site.phone("Ana", on: [air], app: .iPhoneWithBoard)
        #expect(await phone.meets(bridge))
        // A mirrored line (g, n), a board post copied to Nostr (g, n, expiration, bitchat-board), presence (g, r).
        let line = await phone.say("Meet At The Gate")
        #expect(await bridge.verdict(on: line)?.kind == .passed)
        _ = try await phone.postOnBoard("Water At Gate C")
        #expect(await site.advance(until: { await relay.waitForEvent(within: 0.05) { $0.kind == 1 } != nil }, limit: 30_000))
        await site.advance(by: 90_000, step: 500)
        let published = relay.published.all.filter { $0.kind != 20000 || $0.content == "Meet At The Gate" || $0.content.isEmpty }
        #expect(published.count >= 3, "\(published.map(\.kind))")
        let valued: Set<String> = ["g", "r", "x", "e", "p"]
        for event in published {
            for tag in event.tags {
                guard let name = tag.first else { continue }
                #expect(name == name.lowercased(), "tag name \(name) on kind \(event.kind)")
                if valued.contains(name), tag.count > 1 { #expect(tag[1] == tag[1].lowercased(), "\(tag) on kind \(event.kind)") }
            }
        }
        #expect(published.contains { $0.tags.contains(["n", "Ana@mesh"]) }, "a nickname keeps its case")
        for subscription in relay.subscriptions.all {
            for filter in subscription.filters {
                for (name, values) in filter.tags {
                    #expect(name == name.lowercased() && values.allSatisfy { $0 == $0.lowercased() }, "#\(name) \(values)")
                }
            }
        }
        #expect(throws: (any Error).self) { try GeohashCell("U4PRUY") }
        await site.stop()
    }
}
