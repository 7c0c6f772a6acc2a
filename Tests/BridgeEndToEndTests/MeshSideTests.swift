import BotSupport
import BridgeTestSupport
import Foundation
import Testing

extension World {
    /// A Nostr listener on the channel (kinds 20000/20001, `#g`), subscribed before it returns.
    func startChannelListener() async throws -> ChildProcess {
        let listener = try spawn(["nostr", "listen", "--geohash", "u4pruy", "--relay", relayURL], name: "listener")
        _ = try await listener.waitForLine("listener subscribed") { $0.contains("\"eose\"") }
        return listener
    }

    /// Makes `reader` know the mesh identity kept in `phone-<name>` (a verified announce relayed to it), so
    /// that every later message of that identity is shown by the reader if it reaches it at all: without
    /// this, a message relayed ahead of its sender's announce would be silently dropped by the reader and a
    /// test that expects it *not* to arrive could not fail.
    func introduce(_ name: String, island: Int, to reader: ChildProcess) async throws {
        let phone = try spawn(
            ["mesh", "listen", "--mesh", "tcp://127.0.0.1:\(island)", "--data-dir", "\(directory)/phone-\(name)", "--nickname", name],
            name: "intro-\(name)")
        _ = try await reader.waitForLine("\(name) known to the reader") {
            $0.contains("\"peer\"") && $0.contains("\"nickname\":\"\(name)\"")
        }
        // No signed leave: the reader keeps the peer (60 s timeout).
        phone.stop(signal: SIGKILL)
    }

    /// One signed public message from the identity in `phone-<name>`; returns its stable message ID.
    func say(_ text: String, as name: String, island: Int) async throws -> String {
        let phone = try spawn(
            ["mesh", "say", "--mesh", "tcp://127.0.0.1:\(island)", "--data-dir", "\(directory)/phone-\(name)", "--nickname", name, text],
            name: "say-\(name)")
        let line = try await phone.waitForLine("\(name) sent") { $0.contains("\"sent\"") }
        _ = try await phone.waitForExit()
        return try #require(try JSONParser().parse(line)["stableID"]?.stringValue)
    }
}

extension World {
    /// The moderation log of `bridge` as JSON records, read again (bounded, 30 s) until it holds `atLeast`.
    func moderationLog(_ bridge: String, atLeast: Int) async throws -> [JSONValue] {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let modlog = try spawn(["modlog", "--json", "--data-dir", "\(directory)/\(bridge)"], name: "modlog")
            #expect(try await modlog.waitForExit() == 0)
            let records = modlog.stdoutLines.compactMap { try? JSONParser().parse($0) }
            if records.count >= atLeast || ContinuousClock.now > deadline { return records }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

/// Stable IDs of the public messages `reader` printed.
func meshMessages(_ reader: ChildProcess) -> [String] {
    reader.stdoutLines.compactMap { try? JSONParser().parse($0) }.filter { $0["event"] == .string("message") }
        .compactMap { $0["stableID"]?.stringValue }
}

/// Contents of the channel messages (kind 20000) `listener` printed.
func channelTexts(_ listener: ChildProcess) -> [String] {
    listener.stdoutLines.compactMap { try? JSONParser().parse($0)["event"] }.filter { $0["kind"] == .integer(20000) }
        .compactMap { $0["content"]?.stringValue }
}

@Suite("Bridge mesh side end to end (real relay, virtual radio, real processes)", TestEnvironment.needsVenv, .serialized)
struct BridgeMeshSideTests {
    /// Island A (flooder, swarm, organiser) and island B (a mesh-only reader) are joined only by the
    /// bridge, which is on both radio segments: whatever the reader hears from island A, the bridge relayed.
    @Test("mesh flood and 4-identity copy swarm: hidden ones are not relayed by the bridge, nothing of them crosses, logged with rule and figures; shadow mode logs the same and hides nothing",
          arguments: [false, true])
    func meshFloodAndSwarm(shadow: Bool) async throws {
        let world = World()
        try await world.startRelay()
        let islandA = try await world.startIsland()
        let islandB = try await world.startIsland()
        let listener = try await world.startChannelListener()
        let http = LoopbackPort.free()
        _ = try await world.startBridge("bridge", island: islandA, extra: [
            "BRIDGE_MESH": "tcp://127.0.0.1:\(islandA),tcp://127.0.0.1:\(islandB)",
            "BRIDGE_SHADOW": shadow ? "on" : "off", "BRIDGE_TEXT_MIRROR": "up", "BRIDGE_HTTP_LISTEN": "127.0.0.1:\(http)",
        ])
        let reader = try await world.startReader("reader", island: islandB)
        try await world.waitForBridges(reader, count: 1)
        let senders = ["flooder", "swarm1", "swarm2", "swarm3", "swarm4", "organiser"]
        for name in senders { try await world.introduce(name, island: islandA, to: reader) }

        // 10 messages from one peer in a few seconds: the bucket (6, one per 10 s) hides the tail.
        var flood: [String] = []
        for i in 1...10 { flood.append(try await world.say("BUY CHEAP TICKETS NOW \(i)", as: "flooder", island: islandA)) }
        // The same text from 4 identities: the original and 2 copies pass, the 3rd copy is hidden.
        var swarm: [String] = []
        for i in 1...4 { swarm.append(try await world.say("happy new year everyone", as: "swarm\(i)", island: islandA)) }
        let barrier = try await world.say("the stage opens at eight", as: "organiser", island: islandA)
        _ = try await reader.waitForLine("the barrier relayed by the bridge") { $0.contains(barrier) }
        _ = try await listener.waitForLine("the barrier mirrored to the channel") { $0.contains("the stage opens at eight") }
        // The bridge's longest relay jitter is 40 ms and the mirror follows the verdict at once; the barrier
        // came after every other message, so anything still missing is not coming.

        // At least the flood's tail (3) and the swarm's 4th copy.
        let records = try await world.moderationLog("bridge", atLeast: 4)
        let logged = Set(records.compactMap { $0["message_id"]?.stringValue })
        let rules = Set(records.compactMap { $0["rule"]?.stringValue })
        #expect(rules.isSuperset(of: ["messageRate", "crossUserCopy"]), "\(rules)")
        #expect(records.allSatisfy { $0["shadow"] == .bool(shadow) && $0["figures"]?.objectValue?.isEmpty == false })
        #expect(records.allSatisfy { $0["direction"] == .string("mesh-to-nostr") })
        #expect(flood.suffix(3).allSatisfy(logged.contains) && !logged.contains(flood[0]), "\(logged)")
        #expect(logged.contains(swarm[3]) && !swarm.prefix(3).contains(where: logged.contains))
        #expect(!logged.contains(barrier))

        let heard = meshMessages(reader)
        let mirrored = channelTexts(listener)
        for id in logged {
            #expect(heard.filter { $0 == id }.count == (shadow ? 1 : 0), "logged message \(id) relayed to island B")
        }
        #expect(mirrored.filter { $0.hasPrefix("BUY CHEAP TICKETS NOW") }.count == (shadow ? 10 : 10 - logged.intersection(flood).count))
        #expect(mirrored.filter { $0 == "happy new year everyone" }.count == (shadow ? 4 : 3))
        // Ordinary messages pass, relay once and cross once.
        for id in [flood[0], swarm[0], barrier] { #expect(heard.filter { $0 == id }.count == 1, "\(id) on island B") }
        #expect(mirrored.filter { $0 == "BUY CHEAP TICKETS NOW 1" }.count == 1)
        // The gate's outcomes reach /metrics: every hidden message withheld (none in shadow mode).
        let withheld = shadow ? 0 : logged.count
        let metrics = try await scrapeMetrics(port: http) { text in
            text.contains("bridge_mesh_relay_gate_total{outcome=\"released\"}")
                && (withheld == 0 || text.contains("bridge_mesh_relay_gate_total{outcome=\"withheld\"} \(withheld)"))
        }
        #expect(shadow == !metrics.contains("outcome=\"withheld\""), "\(metrics)")
    }
}
