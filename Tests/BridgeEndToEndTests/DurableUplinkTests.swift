import BotStorage
import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// `GET http://127.0.0.1:port/metrics` with Python's urllib (an independent HTTP client), polled until
/// `predicate` holds on the body or `timeout` passes (the bridge publishes its status every 5 s).
func scrapeMetrics(port: Int, timeout: Duration = .seconds(20), until predicate: (String) -> Bool) async throws -> String {
    let script = """
        import sys, urllib.request
        sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())
        """
    let deadline = ContinuousClock.now + timeout
    var last = ""
    while ContinuousClock.now < deadline {
        let child = try ChildProcess("/usr/bin/python3", ["-c", script, "http://127.0.0.1:\(port)/metrics"], name: "scrape")
        if try await child.waitForExit(timeout: .seconds(10)) == 0 {
            last = child.stdoutLines.joined(separator: "\n")
            if predicate(last) { return last }
        }
        try await Task.sleep(for: .milliseconds(500))
    }
    Issue.record("metrics never matched within \(timeout); last scrape:\n\(last)")
    return last
}

/// Rows of the durable uplink queue in `dataDirectory`'s database, as lowercase event-id hex.
func pendingUplinks(_ dataDirectory: String) throws -> [String] {
    let database = try SQLiteDatabase(path: "\(dataDirectory)/bridge.sqlite3")
    defer { database.close() }
    return try database.prepare("SELECT event_id FROM pending_uplinks ORDER BY seq").query { Hex.encode($0.blob(0)) }
}

extension World {
    /// A raw WebSocket subscriber (Python `websockets`, no deduplication of its own) printing every relay
    /// frame as one JSON line: it shows how often the relay delivered each event.
    func startRawSubscriber() async throws -> ChildProcess {
        let script = """
            import asyncio, json, sys, websockets
            async def main():
                async with websockets.connect(sys.argv[1]) as ws:
                    await ws.send(json.dumps(["REQ", "raw", {}]))
                    async for frame in ws:
                        print(frame, flush=True)
            asyncio.run(main())
            """
        let subscriber = try ChildProcess(TestEnvironment.venvBinary("python"), ["-c", script, relayURL], name: "raw-subscriber")
        processes.append(subscriber)
        _ = try await subscriber.waitForLine("raw subscriber's EOSE") { $0.hasPrefix("[\"EOSE\"") }
        return subscriber
    }
}

/// Operations issue §3: SIGHUP reloads the relay list, with two real relay processes.
@Suite("Relay list reload end to end", TestEnvironment.needsVenv, .serialized)
struct RelayReloadTests {
    /// Posts `text` to the channel on `relay` only; returns the event id.
    func post(_ world: World, _ text: String, relay: String) async throws -> String {
        let poster = try world.spawn(
            ["nostr", "post", "--geohash", "u4pruy", "--relay", relay, "--pow", "8", text],
            environment: ["BRIDGE_DATA_DIR": "\(world.directory)/poster-\(UUID().uuidString.prefix(6))"], name: "poster")
        let line = try await poster.waitForLine("post to \(relay)") { $0.contains("\"published\"") }
        return try #require(try JSONParser().parse(line)["event"]?["id"]?.stringValue)
    }

    @Test("""
        SIGHUP: an added relay gets the subscription and its posts cross; a removed relay is disconnected and its \
        posts no longer cross; a bad configuration keeps the relays and logs one error
        """)
    func sighupReloadsRelays() async throws {
        let world = World()
        try await world.startRelay()
        let portB = LoopbackPort.free()
        world.processes.append(try await Peers.start(.sdk, port: portB, directory: world.directory))
        let relayA = world.relayURL, relayB = "ws://127.0.0.1:\(portB)"
        let island = try await world.startIsland()
        let config = "\(world.directory)/bridge.json"
        func writeConfig(_ text: String) throws { try Data(text.utf8).write(to: URL(fileURLWithPath: config)) }
        func relays(_ urls: [String]) -> String {
            #"{"geohash": "u4pruy", "relay_directory": false, "relays": [\#(urls.map { "\"\($0)\"" }.joined(separator: ", "))]}"#
        }
        try writeConfig(relays([relayA]))
        let bridge = try world.spawn(["run", "--config", config], environment: [
            "BRIDGE_DATA_DIR": "\(world.directory)/bridge", "BRIDGE_MESH": "tcp://127.0.0.1:\(island)",
            "BRIDGE_HTTP_LISTEN": "off", "BRIDGE_NICKNAME": "bridge", "BRIDGE_POW_BITS": "8",
        ], name: "bridge")
        _ = try await bridge.waitForLine(stderr: true, "connected to A") { $0.contains("relay connected") && $0.contains(relayA) }
        let reader = try await world.startReader("reader", island: island)
        try await world.waitForBridges(reader, count: 1)
        let onA = try await post(world, "on relay A at start", relay: relayA)
        _ = try await reader.waitForLine("A's post crosses") { $0.contains(onA) }

        // A + B.
        try writeConfig(relays([relayA, relayB]))
        kill(bridge.pid, SIGHUP)
        let added = try await bridge.waitForLine(stderr: true, "B added") { $0.contains("\"relays reloaded\"") }
        #expect(added.contains(#""relays.added":["\#(relayB)"]"#) && added.contains(#""relays.removed":[]"#), "\(added)")
        _ = try await bridge.waitForLine(stderr: true, "connected to B") { $0.contains("relay connected") && $0.contains(relayB) }
        let onB = try await post(world, "on relay B after the reload", relay: relayB)
        _ = try await reader.waitForLine("B's post crosses (the subscription is on B)") { $0.contains(onB) }

        // B only: A is closed.
        try writeConfig(relays([relayB]))
        kill(bridge.pid, SIGHUP)
        _ = try await bridge.waitForLine(stderr: true, "A removed") {
            $0.contains("\"relays reloaded\"") && $0.contains(#""relays.removed":["\#(relayA)"]"#)
        }
        _ = try await bridge.waitForLine(stderr: true, "disconnected from A") { $0.contains("relay disconnected") && $0.contains(relayA) }
        let lateOnA = try await post(world, "on relay A after its removal", relay: relayA)

        // A bad file: one clear error, the relays stay (B still carries).
        try writeConfig(#"{"geohash": "u4pruy", "relays": ["#)
        kill(bridge.pid, SIGHUP)
        let failed = try await bridge.waitForLine(stderr: true, "failed reload") { $0.contains("relay list reload failed") }
        #expect(failed.contains(config))
        let barrier = try await post(world, "on relay B after a bad edit", relay: relayB)
        _ = try await reader.waitForLine("B still carries") { $0.contains(barrier) }
        try await Task.sleep(for: .seconds(2))  // longest downlink hold: a late carrier of A's post
        #expect(carriers(reader, eventID: lateOnA).isEmpty)
        #expect(bridge.stderrLines.filter { $0.contains("relay list reload failed") }.count == 1)
        #expect(bridge.stderrLines.filter { $0.contains("relay connected") && $0.contains(relayA) }.count == 1)
        #expect(bridge.isRunning)
    }
}
