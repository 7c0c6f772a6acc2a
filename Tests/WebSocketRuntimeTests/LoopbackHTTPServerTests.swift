import BotSupport
import BridgeTestSupport
import Foundation
import Synchronization
import Testing
import WebSocketRuntime

/// One HTTP request from Python's urllib (a real, independent HTTP client) to the listener.
struct Fetched {
    let status: Int
    let contentType: String
    let body: String
}

func pythonFetch(_ url: String, method: String = "GET") async throws -> Fetched {
    let script = """
        import sys, json, urllib.request, urllib.error
        req = urllib.request.Request(sys.argv[1], method=sys.argv[2])
        try:
            r = urllib.request.urlopen(req, timeout=5)
            code, ctype, body = r.status, r.headers.get('Content-Type', ''), r.read()
        except urllib.error.HTTPError as e:
            code, ctype, body = e.code, e.headers.get('Content-Type', ''), e.read()
        with open(sys.argv[3], "w") as out:
            json.dump({"status": code, "type": ctype, "body": body.decode()}, out)
        """
    // The result goes through a file: a large body on a pipe may still be in flight when the child exits.
    let resultFile = TestEnvironment.temporaryDirectory("http-fetch") + "/result.json"
    let child = try ChildProcess("/usr/bin/python3", ["-c", script, url, method, resultFile])
    let status = try await child.waitForExit(timeout: .seconds(20))
    #expect(status == 0, "\(child.transcript)")
    let value = try JSONParser().parse(try FileIO.read(resultFile))
    return Fetched(
        status: Int(value["status"]?.integerValue ?? -1), contentType: value["type"]?.stringValue ?? "",
        body: value["body"]?.stringValue ?? "")
}

@Suite("LoopbackHTTPServer (libwebsockets HTTP role) with a real HTTP client")
struct LoopbackHTTPServerTests {
    final class ManualTime: Sendable {
        let instant = Mutex(ContinuousClock.now)
        var now: ContinuousClock.Instant { instant.withLock { $0 } }
    }

    @Test("/healthz flips 200 → 503 → 200 with the published snapshot; /metrics is Prometheus text")
    func healthAndMetrics() async throws {
        let time = ManualTime()
        let board = StatusBoard(maxAge: .seconds(30), now: { time.now })
        let server = LoopbackHTTPServer(host: "127.0.0.1", port: 0, responder: board.response(method:path:))
        try server.start()
        defer { server.stop() }
        #expect(server.port > 0)
        let base = "http://127.0.0.1:\(server.port)"

        let starting = try await pythonFetch(base + "/healthz")
        #expect(starting.status == 503 && starting.contentType == "application/json")
        #expect(starting.body.contains("starting"))

        var metrics = MetricsSnapshot()
        metrics.counter("bridge_forwarded_total", "Forwarded.", labels: [.init("direction", "down\"link")], 7)
        board.publish(health: HealthReport(checks: [.init(name: "relays", ok: true, detail: "1 of 1 connected")]), metrics: metrics)
        let ok = try await pythonFetch(base + "/healthz")
        #expect(ok.status == 200)
        #expect(try JSONParser().parse(ok.body)["status"] == .string("ok"))

        board.publish(
            health: HealthReport(checks: [.init(name: "mesh", ok: false, detail: "down")]), metrics: metrics)
        let sick = try await pythonFetch(base + "/healthz")
        #expect(sick.status == 503)
        #expect(try JSONParser().parse(sick.body)["reasons"] == .array([.string("mesh: down")]))

        let scraped = try await pythonFetch(base + "/metrics")
        #expect(scraped.status == 200)
        #expect(scraped.contentType == PrometheusText.contentType)
        #expect(scraped.body.contains(#"bridge_forwarded_total{direction="down\"link"} 7"#))
        #expect(try PrometheusText.parse(scraped.body) == metrics)

        #expect(try await pythonFetch(base + "/nope").status == 404)
        #expect(try await pythonFetch(base + "/healthz", method: "HEAD").status == 503)
    }

    @Test("a body larger than one write chunk arrives whole")
    func largeBody() async throws {
        var metrics = MetricsSnapshot()
        for i in 0..<3_000 { metrics.gauge("bridge_queue_depth", "Depth.", labels: [.init("queue", "q\(i)")], Double(i)) }
        let rendered = PrometheusText.render(metrics)
        #expect(rendered.utf8.count > 4 * LoopbackHTTPServer.Limits.writeChunkBytes)
        let board = StatusBoard(maxAge: .seconds(30), now: { ContinuousClock.now })
        board.publish(health: HealthReport(checks: []), metrics: metrics)
        let server = LoopbackHTTPServer(host: "localhost", port: 0, responder: board.response(method:path:))
        try server.start()
        defer { server.stop() }
        let scraped = try await pythonFetch("http://127.0.0.1:\(server.port)/metrics")
        #expect(scraped.body == rendered)
    }

    @Test("refuses non-loopback hosts, and a port already taken")
    func refusals() throws {
        let any = LoopbackHTTPServer(host: "0.0.0.0", port: 0) { _, _ in HTTPResponse(status: 200, json: .null) }
        #expect(throws: LoopbackHTTPServer.StartError.notLoopback(host: "0.0.0.0")) { try any.start() }
        let first = LoopbackHTTPServer(host: "127.0.0.1", port: 0) { _, _ in HTTPResponse(status: 200, json: .null) }
        try first.start()
        defer { first.stop() }
        let second = LoopbackHTTPServer(host: "127.0.0.1", port: first.port) { _, _ in HTTPResponse(status: 200, json: .null) }
        #expect {
            try second.start()
        } throws: { error in
            guard case .cannotListen = error as? LoopbackHTTPServer.StartError else { return false }
            return true
        }
    }

    @Test("start/stop cycles leave no thread or port behind")
    func cycles() async throws {
        for _ in 0..<20 {
            let server = LoopbackHTTPServer(host: "127.0.0.1", port: 0) { _, path in
                HTTPResponse(status: 200, contentType: "text/plain", body: Array(path.utf8))
            }
            try server.start()
            server.stop()
            server.stop()
        }
        // The last port can be bound again at once (no lingering listener).
        let server = LoopbackHTTPServer(host: "127.0.0.1", port: 0) { _, path in
            HTTPResponse(status: 200, contentType: "text/plain", body: Array(path.utf8))
        }
        try server.start()
        let port = server.port
        server.stop()
        let again = LoopbackHTTPServer(host: "127.0.0.1", port: port) { _, path in
            HTTPResponse(status: 200, contentType: "text/plain", body: Array(path.utf8))
        }
        try again.start()
        #expect(try await pythonFetch("http://127.0.0.1:\(port)/echo?q=1").body == "/echo")
        again.stop()
    }

    @Test("body sizes at the write chunk boundary: n−1, n, n+1 and 2n+1 bytes arrive whole", arguments: [-1, 0, 1, LoopbackHTTPServer.Limits.writeChunkBytes + 1])
    func chunkBoundary(delta: Int) async throws {
        let size = LoopbackHTTPServer.Limits.writeChunkBytes + delta
        let body = (0..<size).map { UInt8(0x61 + $0 % 26) }
        let server = LoopbackHTTPServer(host: "127.0.0.1", port: 0) { _, _ in
            HTTPResponse(status: 200, contentType: "text/plain", body: body)
        }
        try server.start()
        defer { server.stop() }
        let fetched = try await pythonFetch("http://127.0.0.1:\(server.port)/x")
        #expect(fetched.status == 200)
        #expect(fetched.body.utf8.count == size && Array(fetched.body.utf8) == body)
    }

    @Test("listen addresses: host:port, [::1]:port; bad ones named", arguments: [
        ("127.0.0.1:9477", "127.0.0.1", 9477), ("localhost:0", "localhost", 0), ("[::1]:65535", "::1", 65535),
    ])
    func parseListen(text: String, host: String, port: Int) throws {
        let parsed = try LoopbackHTTPServer.parseListen(text)
        #expect(parsed.host == host && parsed.port == port)
    }

    @Test("bad listen addresses", arguments: ["9477", ":9477", "::1:9477", "127.0.0.1:x", "[]:1", "127.0.0.1:65536"])
    func badListen(text: String) {
        #expect(throws: LoopbackHTTPServer.StartError.self) { try LoopbackHTTPServer.parseListen(text) }
    }

    @Test("an IPv6 loopback listener serves too")
    func ipv6() async throws {
        let server = LoopbackHTTPServer(host: "::1", port: 0) { _, path in
            HTTPResponse(status: 200, contentType: "text/plain", body: Array(path.utf8))
        }
        try server.start()
        defer { server.stop() }
        #expect(try await pythonFetch("http://[::1]:\(server.port)/six").body == "/six")
    }

    @Test(
        "/metrics parses with the official Python client (prometheus_client), labels and values intact",
        .enabled(if: TestEnvironment.hasVenv))
    func officialParser() async throws {
        var metrics = MetricsSnapshot()
        metrics.counter("bridge_hidden_total", "Hidden by rule.\nSecond line \\ backslash.",
                        labels: [.init("direction", "uplink"), .init("rule", "rate \"burst\"\n\\x é")], 3)
        metrics.gauge("bridge_mesh_peers", "Peers.", 2.5)
        metrics.gauge("bridge_queue_depth", "Depth.", labels: [.init("queue", "relay:wss://a.example/?x=1")], 0)
        metrics.declare("bridge_deposits_total", "Nothing yet.", kind: .counter)
        let board = StatusBoard(maxAge: .seconds(30), now: { ContinuousClock.now })
        board.publish(health: HealthReport(checks: []), metrics: metrics)
        let server = LoopbackHTTPServer(host: "127.0.0.1", port: 0, responder: board.response(method:path:))
        try server.start()
        defer { server.stop() }
        let script = """
            import sys, json, urllib.request
            from prometheus_client.parser import text_string_to_metric_families
            text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
            out = []
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    out.append({"family": family.name, "type": family.type, "doc": family.documentation,
                                "name": s.name, "labels": s.labels, "value": s.value})
            with open(sys.argv[2], "w") as f:
                json.dump(out, f)
            """
        let resultFile = TestEnvironment.temporaryDirectory("prom") + "/samples.json"
        let child = try ChildProcess(
            TestEnvironment.venvBinary("python"), ["-c", script, "http://127.0.0.1:\(server.port)/metrics", resultFile])
        #expect(try await child.waitForExit(timeout: .seconds(30)) == 0, "\(child.transcript)")
        let samples = try #require(try JSONParser().parse(try FileIO.read(resultFile)).arrayValue)
        #expect(samples.count == 3)
        let hidden = try #require(samples.first { $0["name"] == .string("bridge_hidden_total") })
        #expect(hidden["type"] == .string("counter"))
        #expect(hidden["doc"] == .string("Hidden by rule.\nSecond line \\ backslash."))
        #expect(hidden["labels"]?["rule"] == .string("rate \"burst\"\n\\x é"))
        #expect(hidden["value"]?.numberValue == 3)
        let peers = try #require(samples.first { $0["name"] == .string("bridge_mesh_peers") })
        #expect(peers["type"] == .string("gauge") && peers["value"]?.numberValue == 2.5)
        let queue = try #require(samples.first { $0["name"] == .string("bridge_queue_depth") })
        #expect(queue["labels"]?["queue"] == .string("relay:wss://a.example/?x=1"))
    }
}
