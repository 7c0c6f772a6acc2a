import BridgeApp
import BridgeCore
import BridgeTesting
import BotSupport
import Moderation
import Nostr
import Testing

/// Release both ways (issue 23 finding 4: only a Nostr→mesh hide could be released, and released rows still looked
/// hidden), through the control socket as `bitchat-bridge modlog release ID` sends it.
@Suite("World: release")
struct ReleaseTests {
    /// What `bitchat-bridge modlog release ID` sends, off the cooperative pool (``offPool(_:)``).
    static func release(_ id: String, on bridge: TestBridge) async throws -> JSONValue {
        let directory = bridge.dataDirectory
        return try await offPool { () throws(ControlSocket.RequestError) -> JSONValue in
            try ControlSocket.request(.object([("op", .string("modlog.release")), ("id", .string(id))]), dataDirectory: directory)
        }
    }

    @Test("a hidden mesh line is released onto Nostr as the mirror line, a hidden channel event onto the mesh as a carrier; both log rows are marked released by cli; a second release is refused")
    func releaseBothWays() async throws {
        let site = Site(name: "release")
        let relay = try site.relay()
        let islandA = site.segment(), islandB = site.segment()
        let bridge = try await site.bridge("bridge", relays: [relay], segments: [islandA, islandB], settings: ["BRIDGE_TEXT_MIRROR": "both"])
        let reader = await site.phone("reader", on: [islandB])
        #expect(await reader.knows(await bridge.peerID))
        let flooder = await site.phone("flooder", on: [islandA])
        #expect(await site.advance(until: { await reader.knows(flooder.id, within: 0.05) }), "the reader knows the flooder")

        // Mesh side: a burst of lines, its tail hidden.
        var meshHidden: (id: String, text: String)?
        for i in 1...10 {
            let text = "mesh line number \(i) from the flooder"
            let id = await flooder.say(text)
            if await bridge.verdict(on: id)?.kind == .hidden, meshHidden == nil { meshHidden = (id, text) }
        }
        let mesh = try #require(meshHidden, "the mesh burst's tail is hidden")
        #expect(!relay.published.all.contains { $0.content == mesh.text })
        #expect(try await Self.release(mesh.id, on: bridge)["ok"] == .bool(true))
        // Published at once (no schedule on the uplink side): the wait is for the relay's socket, in real time.
        #expect(await relay.published.first(within: 20) { $0.kind == NostrKind.ephemeralChat && $0.content == mesh.text } != nil,
                "the released mesh line reached the relay as the mirror line")

        // Nostr side: a burst of channel events, its tail hidden.
        let poster = site.poster("poster")
        var nostrHidden: EventID?
        for i in 1...10 {
            let event = try poster.post("channel line number \(i) from the poster", to: relay)
            if await bridge.verdict(on: event.id.hex)?.kind == .hidden, nostrHidden == nil { nostrHidden = event.id }
        }
        let channel = try #require(nostrHidden, "the channel burst's tail is hidden")
        #expect(try await Self.release(channel.hex, on: bridge)["ok"] == .bool(true))
        #expect(await site.advance(until: { await reader.heard(carriers: [channel]) }, limit: 30_000), "the released event on the mesh")

        // The log says so: who released each, and when; a released message is no longer held.
        let rows = try bridge.moderationLog().filter { [mesh.id, channel.hex].contains($0.messageID) }
        #expect(rows.count == 2 && rows.allSatisfy { $0.releasedBy == "cli" && $0.releasedAt != nil }, "\(rows)")
        await #expect(throws: ControlSocket.RequestError.self) { try await Self.release(mesh.id, on: bridge) }
        await site.stop()
    }

    @Test("a mesh-only phone's hidden deposit is released onto the relays as its own signed event, once")
    func releaseADeposit() async throws {
        let site = Site(name: "release-deposit")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("gateway", relays: [relay], segments: [air], settings: ["BRIDGE_RENDEZVOUS": "off"])
        let phone = await site.phone("phone", on: [air])
        #expect(await phone.meets(bridge))
        // One Nostr key for every deposit: the burst's tail is the filter's to hide (10 a minute pass the depositor limit).
        let seed = [UInt8](repeating: 0x33, count: 32)
        var hidden: NostrEvent?
        for i in 1...9 {
            let event = try await phone.deposit("no signal here, deposit number \(i)", geohash: "u4pruy", to: await bridge.peerID, nostrSeed: seed)
            if await bridge.verdict(on: event.id.hex)?.kind == .hidden, hidden == nil { hidden = event }
            await site.advance(by: 1_000)
        }
        let deposit = try #require(hidden, "the deposits' tail is hidden")
        #expect(!relay.published.all.contains { $0.id == deposit.id })
        #expect(try await Self.release(deposit.id.hex, on: bridge)["ok"] == .bool(true))
        #expect(await relay.published.first(within: 20) { $0.id == deposit.id } != nil, "the phone's own event on the relay")
        await #expect(throws: ControlSocket.RequestError.self) { try await Self.release(deposit.id.hex, on: bridge) }
        await site.stop()
    }

    @Test("hides are kept on disk: after a graceful restart a hidden mesh line is still released onto Nostr, once")
    func releaseAfterARestart() async throws {
        let site = Site(name: "release-restart")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("bridge", relays: [relay], segments: [air], settings: ["BRIDGE_TEXT_MIRROR": "both"])
        let flooder = await site.phone("flooder", on: [air])
        #expect(await flooder.meets(bridge))
        var hidden: (id: String, text: String)?
        for i in 1...10 {
            let text = "a line kept over a restart, number \(i)"
            let id = await flooder.say(text)
            if await bridge.verdict(on: id)?.kind == .hidden, hidden == nil { hidden = (id, text) }
        }
        let line = try #require(hidden, "the burst's tail is hidden")
        try await bridge.restart()
        #expect(try await Self.release(line.id, on: bridge)["ok"] == .bool(true))
        #expect(await relay.published.first(within: 20) { $0.kind == NostrKind.ephemeralChat && $0.content == line.text } != nil)
        await #expect(throws: ControlSocket.RequestError.self) { try await Self.release(line.id, on: bridge) }
        await site.stop()
    }
}
