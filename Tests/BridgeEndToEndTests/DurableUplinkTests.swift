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

/// Operations issue §3 (flush pending uplinks at stop) and §2 (relay states on `/metrics`), end to end.
@Suite("Durable uplinks and relay metrics end to end", .enabled(if: TestEnvironment.hasVenv), .serialized)
struct DurableUplinkTests {
    @Test("""
        a deposit held while the relay is down survives SIGTERM and reaches the relay exactly once after the \
        restart; /metrics shows the relay up, down, and its reconnect
        """)
    func depositSurvivesStop() async throws {
        let world = World()
        try await world.startRelay()
        let island = try await world.startIsland()
        let http = LoopbackPort.free()
        let relay = world.relayURL
        let extra = ["BRIDGE_HTTP_LISTEN": "127.0.0.1:\(http)"]
        let bridge = try await world.startBridge("bridge", island: island, extra: extra)
        let reader = try await world.startReader("reader", island: island)
        try await world.waitForBridges(reader, count: 1)
        _ = try await scrapeMetrics(port: http) {
            $0.contains("bridge_relay_up{relay=\"\(relay)\"} 1") && $0.contains("bridge_relay_state{relay=\"\(relay)\",state=\"open\"} 1")
        }

        // The relay goes away: the bridge holds the deposit (no relay to publish to).
        world.relay?.stop(signal: SIGKILL)
        _ = try await bridge.waitForLine(stderr: true, "relay lost") { $0.contains("relay disconnected") }
        let held = try await world.deposit(island: island, text: "said while the relay was down")
        let down = try await scrapeMetrics(port: http) { $0.contains("bridge_queue_depth{queue=\"uplink\"} 1") }
        #expect(down.contains("bridge_relay_up{relay=\"\(relay)\"} 0"))
        #expect(down.contains("bridge_relay_state{relay=\"\(relay)\",state=\"open\"} 0"))

        // Graceful stop: the held deposit is flushed to the queue store.
        kill(bridge.pid, SIGTERM)
        #expect(try await bridge.waitForExit(timeout: .seconds(10)) == 0, "\(bridge.transcript)")
        #expect(bridge.stderrLines.contains {
            $0.contains("pending uplinks flushed to the queue store") && $0.contains("\"uplinks.held\":1")
        }, "\(bridge.transcript)")
        #expect(try pendingUplinks("\(world.directory)/bridge") == [held])

        // Relay back, a raw subscriber on it, then the bridge restarts and replays.
        try await world.startRelay()
        let subscriber = try await world.startRawSubscriber()
        let restarted = try await world.startBridge("bridge", island: island, extra: extra)
        _ = try await restarted.waitForLine(stderr: true, "the replay") { $0.contains("replaying pending uplinks") && $0.contains(held) }
        _ = try await subscriber.waitForLine("the held deposit reaches the relay") { $0.hasPrefix("[\"EVENT\"") && $0.contains(held) }
        // A later deposit is the barrier: once it is on the relay, a repeat of the first would be too.
        let barrier = try await world.deposit(island: island, text: "said after the restart")
        _ = try await subscriber.waitForLine("the barrier reaches the relay") { $0.hasPrefix("[\"EVENT\"") && $0.contains(barrier) }
        #expect(subscriber.stdoutLines.filter { $0.hasPrefix("[\"EVENT\"") && $0.contains(held) }.count == 1)

        // The relay restarts under the running bridge: one reconnect, shown on /metrics.
        world.relay?.stop(signal: SIGKILL)
        _ = try await restarted.waitForLine(stderr: true, "relay lost again") { $0.contains("relay disconnected") }
        try await world.startRelay()
        _ = try await scrapeMetrics(port: http, timeout: .seconds(30)) {
            $0.contains("bridge_relay_reconnects_total{relay=\"\(relay)\"} 1") && $0.contains("bridge_relay_up{relay=\"\(relay)\"} 1")
        }

        // Acknowledged: nothing is left to replay at the next start.
        kill(restarted.pid, SIGTERM)
        #expect(try await restarted.waitForExit(timeout: .seconds(10)) == 0)
        #expect(restarted.stderrLines.contains { $0.contains("pending uplinks flushed") && $0.contains("\"uplinks.pending\":0") })
        #expect(try pendingUplinks("\(world.directory)/bridge").isEmpty)
    }
}
