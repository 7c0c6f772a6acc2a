import BotSupport
import Synchronization
import Testing

@Suite("Metrics snapshot and Prometheus text")
struct MetricsTests {
    @Test("renders HELP/TYPE once per family, labels in order, whole numbers without a fraction")
    func render() {
        var s = MetricsSnapshot()
        s.counter("bitchat_bridge_forwarded_total", "Messages carried across.", labels: [.init("direction", "downlink")], 3)
        s.counter("bitchat_bridge_forwarded_total", "", labels: [.init("direction", "uplink")], 1)
        s.gauge("bitchat_bridge_mesh_peers", "Peers.", 2.5)
        s.declare("bridge_empty_total", "Nothing yet.", kind: .counter)
        #expect(PrometheusText.render(s) == """
            # HELP bitchat_bridge_forwarded_total Messages carried across.
            # TYPE bitchat_bridge_forwarded_total counter
            bitchat_bridge_forwarded_total{direction="downlink"} 3
            bitchat_bridge_forwarded_total{direction="uplink"} 1
            # HELP bitchat_bridge_mesh_peers Peers.
            # TYPE bitchat_bridge_mesh_peers gauge
            bitchat_bridge_mesh_peers 2.5
            # HELP bridge_empty_total Nothing yet.
            # TYPE bridge_empty_total counter

            """)
    }

    @Test("label values escape backslash, quote and newline; help escapes backslash and newline")
    func escaping() throws {
        var s = MetricsSnapshot()
        s.gauge("x", "a \\ b\nc \"q\"", labels: [.init("relay", "wss://a\"b\\c\nd")], 1)
        let text = PrometheusText.render(s)
        #expect(text.contains(#"# HELP x a \\ b\nc "q""#))
        #expect(text.contains(#"x{relay="wss://a\"b\\c\nd"} 1"#))
        let back = try PrometheusText.parse(text)
        #expect(back == s)
    }

    @Test("special values: NaN, ±Inf, large and fractional numbers")
    func values() throws {
        #expect(PrometheusText.formatValue(.nan) == "NaN")
        #expect(PrometheusText.formatValue(.infinity) == "+Inf")
        #expect(PrometheusText.formatValue(-.infinity) == "-Inf")
        #expect(PrometheusText.formatValue(42) == "42")
        #expect(PrometheusText.formatValue(-0.25) == "-0.25")
        #expect(PrometheusText.formatValue(1e20) == "1e+20")
        let parsed = try PrometheusText.parse("a +Inf\nb -Inf\nc 1e+20\nd 7 1700000000000\n")
        #expect(parsed.value("a") == .infinity && parsed.value("b") == -.infinity)
        #expect(parsed.value("c") == 1e20 && parsed.value("d") == 7)
    }

    @Test("same name and labels replaces the value")
    func replace() {
        var s = MetricsSnapshot()
        s.gauge("q", "", labels: [.init("queue", "uplink")], 1)
        s.gauge("q", "", labels: [.init("queue", "uplink")], 5)
        #expect(s.family("q")?.samples.count == 1 && s.value("q", labels: [.init("queue", "uplink")]) == 5)
    }

    @Test("series limit: maxSeries kept, the next one dropped and counted")
    func seriesLimit() {
        var s = MetricsSnapshot()
        for i in 0..<MetricsSnapshot.Limits.maxSeries {
            s.counter("c_total", "", labels: [.init("i", String(i))], 1)
        }
        #expect(s.droppedSeries == 0)
        // Replacing an existing series is not a new one.
        s.counter("c_total", "", labels: [.init("i", "0")], 2)
        #expect(s.droppedSeries == 0)
        s.counter("c_total", "", labels: [.init("i", "extra")], 1)
        #expect(s.droppedSeries == 1)
        #expect(s.family("c_total")?.samples.count == MetricsSnapshot.Limits.maxSeries)
        #expect(PrometheusText.render(s).hasSuffix("metrics_series_dropped_total 1\n"))
    }

    @Test("name rules")
    func names() {
        #expect(MetricsSnapshot.isValidMetricName("bridge_x:y_total"))
        #expect(!MetricsSnapshot.isValidMetricName("9x") && !MetricsSnapshot.isValidMetricName("") && !MetricsSnapshot.isValidMetricName("a-b"))
        #expect(MetricsSnapshot.isValidLabelName("_a1") && !MetricsSnapshot.isValidLabelName("__name") && !MetricsSnapshot.isValidLabelName("a:b"))
    }

    @Test("parse rejects malformed lines with the line number", arguments: [
        ("a{b=\"c} 1\n", 1), ("ok 1\nbad-name 1\n", 2), ("a{b=c} 1\n", 1), ("a\n", 1), ("a 1 2 3\n", 1),
        ("# TYPE a histogram\n", 1), ("a{b=\"\\x\"} 1\n", 1), ("a{__b=\"c\"} 1\n", 1), ("a x\n", 1),
        ("# TYPE a counter\na 1\n# TYPE a gauge\na{x=\"1\"} 2\n", 3), ("a 1\n# TYPE a counter\n", 2),
    ])
    func parseErrors(text: String, line: Int) {
        #expect(throws: PrometheusText.ParseError.self) { try PrometheusText.parse(text) }
        do {
            _ = try PrometheusText.parse(text)
        } catch {
            if case .malformedLine(let at, _) = error { #expect(at == line, "\(text)") }
        }
    }

    @Test("parse: size limit at n and n+1")
    func parseLimit() throws {
        let n = PrometheusText.Limits.maxParseBytes
        let comment = "#" + String(repeating: " ", count: n - 2) + "\n"
        #expect(comment.utf8.count == n)
        #expect(try PrometheusText.parse(comment).families.isEmpty)
        #expect(throws: PrometheusText.ParseError.tooLarge(bytes: n + 1)) { try PrometheusText.parse(comment + " ") }
    }
}

@Suite("StatusBoard: /healthz and /metrics answers")
struct StatusBoardTests {
    final class ManualTime: Sendable {
        let instant = Mutex(ContinuousClock.now)
        func advance(_ d: Duration) { instant.withLock { $0 += d } }
        var now: ContinuousClock.Instant { instant.withLock { $0 } }
    }

    let healthy = HealthReport(checks: [.init(name: "relays", ok: true, detail: "1 of 1 connected")])

    @Test("nothing published yet → 503 starting")
    func starting() throws {
        let time = ManualTime()
        let board = StatusBoard(maxAge: .seconds(30), now: { time.now })
        let response = board.response(method: "GET", path: "/healthz")
        #expect(response.status == 503)
        let body = try JSONParser().parse(String(decoding: response.body, as: UTF8.self))
        #expect(body["status"] == .string("unhealthy"))
        #expect(body["reasons"]?.arrayValue?.first?.stringValue?.hasPrefix("status: starting") == true)
    }

    @Test("healthy → 200; unhealthy → 503 with reasons; stale at maxAge+ → 503")
    func flips() throws {
        let time = ManualTime()
        let board = StatusBoard(maxAge: .seconds(30), now: { time.now })
        board.publish(health: healthy, metrics: MetricsSnapshot())
        #expect(board.response(method: "GET", path: "/healthz").status == 200)
        #expect(board.response(method: "HEAD", path: "/healthz?x=1").status == 200)
        time.advance(.seconds(30))
        #expect(board.response(method: "GET", path: "/healthz").status == 200)
        time.advance(.milliseconds(1))
        let stale = board.response(method: "GET", path: "/healthz")
        #expect(stale.status == 503)
        #expect(String(decoding: stale.body, as: UTF8.self).contains("stale: last published 30 s ago"))
        let sick = HealthReport(checks: healthy.checks + [.init(name: "mesh", ok: false, detail: "down: adapter off")])
        board.publish(health: sick, metrics: MetricsSnapshot())
        let body = try JSONParser().parse(String(decoding: board.response(method: "GET", path: "/healthz").body, as: UTF8.self))
        #expect(body["reasons"] == .array([.string("mesh: down: adapter off")]))
        #expect(body["checks"]?.arrayValue?.count == 2)
    }

    @Test("live health: evaluated per request (no publish needed to flip), the heartbeat's staleness still applies")
    func liveHealth() throws {
        let time = ManualTime()
        let meshUp = Mutex(true)
        let board = StatusBoard(maxAge: .seconds(30), now: { time.now }, liveHealth: {
            let up = meshUp.withLock { $0 }
            return HealthReport(checks: [.init(name: "mesh", ok: up, detail: up ? "up" : "down: hub connection lost")])
        })
        // No heartbeat yet: starting, whatever the live checks say.
        #expect(board.response(method: "GET", path: "/healthz").status == 503)
        board.publish(metrics: MetricsSnapshot())
        #expect(board.response(method: "GET", path: "/healthz").status == 200)
        meshUp.withLock { $0 = false }
        let down = board.response(method: "GET", path: "/healthz")
        #expect(down.status == 503)
        let body = try JSONParser().parse(String(decoding: down.body, as: UTF8.self))
        #expect(body["reasons"] == .array([.string("mesh: down: hub connection lost")]))
        meshUp.withLock { $0 = true }
        #expect(board.response(method: "GET", path: "/healthz").status == 200)
        time.advance(.seconds(31))
        #expect(board.response(method: "GET", path: "/healthz").status == 503)
    }

    @Test("/metrics renders the published snapshot; other paths 404, other methods 405")
    func routes() {
        let time = ManualTime()
        let board = StatusBoard(maxAge: .seconds(30), now: { time.now })
        var metrics = MetricsSnapshot()
        metrics.gauge("bitchat_bridge_mesh_peers", "Peers.", 4)
        board.publish(health: healthy, metrics: metrics)
        let response = board.response(method: "GET", path: "/metrics")
        #expect(response.status == 200 && response.contentType == PrometheusText.contentType)
        #expect(String(decoding: response.body, as: UTF8.self).contains("bitchat_bridge_mesh_peers 4\n"))
        #expect(board.response(method: "GET", path: "/").status == 404)
        #expect(board.response(method: "POST", path: "/healthz").status == 405)
    }
}
