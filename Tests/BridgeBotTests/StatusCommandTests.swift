import BotSupport
import Bridge
import BridgeTestSupport
import BridgeTesting
import Foundation
import Testing
import WebSocketRuntime
import BridgeCore

/// `bitchat-bridge status` against a real listener (the same StatusBoard + LoopbackHTTPServer `run` uses).
@Suite("bitchat-bridge status")
struct StatusCommandTests {
    @Test("healthy → exit 0 with a summary; unhealthy → exit 1 with the reasons; --json carries both")
    func healthyAndUnhealthy() async throws {
        // Staleness is tested with a manual clock elsewhere; here a loaded machine must not make the snapshot stale.
        let board = StatusBoard(maxAge: .seconds(3600), now: { ContinuousClock.now })
        let server = LoopbackHTTPServer(host: "127.0.0.1", port: 0, responder: board.response(method:path:))
        try server.start()
        defer { server.stop() }
        let address = "127.0.0.1:\(server.port)"
        let start = ContinuousClock.now
        let health = BridgeHealth(startedAt: start)
        var metrics = BridgeMetrics()
        metrics.relays["ws://127.0.0.1:7777"] = { var r = BridgeMetrics.RelayFigures(); r.state = "open"; r.answering = true; return r }()
        metrics.forwarded["downlink"] = 12
        metrics.courier = { var c = BridgeMetrics.CourierFigures(); c.watchedPeers = 3; c.held = 1; c.tagsPerFilter = 48; return c }()
        board.publish(
            health: health.evaluate(.init(answeringRelays: 1, configuredRelays: 1, meshUp: true, meshDetail: "tcp://127.0.0.1:9"), now: start),
            metrics: metrics.snapshot())

        let ok = try await runBridge(["status", "--http", address])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout.contains("healthy"))
        #expect(ok.stdout.contains("[ok] relays: 1 of 1 answering"))
        #expect(ok.stdout.contains("bitchat_bridge_forwarded_total{direction=downlink}"))
        #expect(ok.stdout.contains("not shown"))
        #expect(ok.stdout.contains("Courier gateway: on — 3 watched peers, 1 held, 0 pending, 0 handed over, 0 drops published, filters cut to 48 tags by a relay"))

        let json = try await runBridge(["status", "--json"], environment: ["BRIDGE_HTTP_LISTEN": address])
        #expect(json.status == 0)
        let value = try JSONParser().parse(json.stdout)
        #expect(value["healthy"] == .bool(true))
        #expect(value["metrics"]?["bitchat_bridge_forwarded_total"]?["samples"]?.arrayValue?.first?["value"] == .integer(12))

        board.publish(
            health: health.evaluate(.init(answeringRelays: 0, configuredRelays: 1, meshUp: false, meshDetail: "hub gone"), now: start),
            metrics: metrics.snapshot())
        let sick = try await runBridge(["status", "--http", address])
        #expect(sick.status == 1)
        #expect(sick.stdout.contains("UNHEALTHY") && sick.stdout.contains("[FAIL] mesh: down: hub gone"))
        #expect(sick.stderr.contains("unhealthy: mesh: down: hub gone"))
    }

    @Test("issue 35: status --data-dir asks the bridge running there where its listener is, --config reads http_listen; either way the answer names the bridge (nickname and geohash)")
    func picksTheBridgeByDataDirectoryOrConfiguration() async throws {
        // An in-process bridge as `run` builds it, with its status listener.
        let site = Site(name: "status-pick")
        let bridge = try await site.bridge(
            "stage-a", relays: [try site.relay()], segments: [site.segment()], settings: ["BRIDGE_HTTP_LISTEN": "127.0.0.1:\(LoopbackPort.free())"])
        let byDirectory = try await runBridge(["status", "--data-dir", bridge.dataDirectory, "--json"])
        let value = try JSONParser().parse(byDirectory.stdout)
        #expect(value["name"] == .string("stage-a (u4pruy)"), "\(byDirectory.stdout) \(byDirectory.stderr)")
        let address = try #require(value["address"]?.stringValue)
        let text = try await runBridge(["status", "--data-dir", bridge.dataDirectory])
        #expect(text.stdout.hasPrefix("bitchat-bridge stage-a (u4pruy) at \(address):"), "\(text.stdout)")

        let config = TestEnvironment.temporaryDirectory("status-config") + "/bridge.json"
        try #"{"geohash": "u4pruy", "http_listen": "\#(address)"}"#.write(toFile: config, atomically: true, encoding: .utf8)
        let byConfig = try await runBridge(["status", "--config", config, "--json"])
        #expect(try JSONParser().parse(byConfig.stdout)["name"] == .string("stage-a (u4pruy)"), "\(byConfig.stderr)")

        let nobody = TestEnvironment.temporaryDirectory("status-nobody")
        let none = try await runBridge(["status", "--data-dir", nobody])
        #expect(none.status == 1 && none.stderr.contains("no bridge answers on \(nobody)"), "\(none.stderr)")
        await site.stop()
    }

    @Test("unreachable → exit 1 naming the address; off or malformed → exit 64")
    func unreachable() async throws {
        let port = LoopbackPort.free()
        let gone = try await runBridge(["status", "--http", "127.0.0.1:\(port)"])
        #expect(gone.status == 1)
        #expect(gone.stderr.contains("127.0.0.1:\(port)") && gone.stderr.contains("refused"))
        #expect(try await runBridge(["status"], environment: ["BRIDGE_HTTP_LISTEN": "off"]).status == 64)
        #expect(try await runBridge(["status", "--http", "nowhere"]).status == 64)
    }
}
