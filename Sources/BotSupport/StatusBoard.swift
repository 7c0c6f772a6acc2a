import Synchronization

/// Whether the process is fit to serve, with the reasons when it is not (the `/healthz` body).
///
/// ```json
/// {"status":"ok","checks":[{"name":"relays","ok":true,"detail":"2 of 3 connected"}, …]}
/// {"status":"unhealthy","reasons":["mesh: transport down (adapter hci0 not powered)"],"checks":[…]}
/// ```
public struct HealthReport: Sendable, Equatable {
    public struct Check: Sendable, Equatable {
        public var name: String
        public var ok: Bool
        public var detail: String

        public init(name: String, ok: Bool, detail: String) {
            self.name = name
            self.ok = ok
            self.detail = detail
        }
    }

    public var checks: [Check]
    /// Which process this is, as its operator named it (a bridge: its nickname and geohash), when known.
    public var name: String?
    /// The other processes this one works with, as it last heard of them (a bridge: its site's stages), when any.
    public var site: JSONValue?

    public init(checks: [Check], name: String? = nil) {
        self.checks = checks
        self.name = name
    }

    public var isHealthy: Bool { checks.allSatisfy(\.ok) }

    /// `"<check>: <detail>"` for each failing check.
    public var reasons: [String] { checks.filter { !$0.ok }.map { "\($0.name): \($0.detail)" } }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = [("status", .string(isHealthy ? "ok" : "unhealthy"))]
        if let name { members.append(("name", .string(name))) }
        if !isHealthy { members.append(("reasons", .array(reasons.map(JSONValue.string)))) }
        if let site { members.append(("site", site)) }
        members.append((
            "checks",
            .array(checks.map { .object([("name", .string($0.name)), ("ok", .bool($0.ok)), ("detail", .string($0.detail))]) })
        ))
        return .object(members)
    }
}

/// One HTTP answer, as plain data (the listener in `WebSocketRuntime` writes it).
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    /// Headers beyond the listener's own (`Set-Cookie`, `Location`, security headers): names without the colon.
    public var headers: [(name: String, value: String)]
    /// When set, the body is this stream (server-sent events): no length, written as it comes, until it ends.
    public var stream: HTTPStream?

    public init(
        status: Int, contentType: String, body: [UInt8], headers: [(name: String, value: String)] = [], stream: HTTPStream? = nil
    ) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
        self.stream = stream
    }

    public static func == (a: HTTPResponse, b: HTTPResponse) -> Bool {
        a.status == b.status && a.contentType == b.contentType && a.body == b.body
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
            && a.stream === b.stream
    }

    public init(status: Int, json: JSONValue) {
        self.init(status: status, contentType: "application/json", body: Array((JSONWriter.compact(json) + "\n").utf8))
    }
}

/// What `/healthz` and `/metrics` are computed from on each request, on the listener's thread (issue 22: no status
/// loop, nothing published ahead of time, nothing stale by up to a period). Each closure must be safe from any
/// thread and bounded in time.
public struct LiveStatus: Sendable {
    /// The health checks from thread-safe state (the transport's, the relay pool's): cheap, read under their locks.
    public var health: @Sendable () -> HealthReport
    /// The owner's heartbeat: whether it answered within its timeout (a hung coordinator must not look healthy).
    public var ownerAnswers: @Sendable () -> Bool
    /// The metrics as of now; nil when the owner did not answer within its timeout.
    public var metrics: @Sendable () -> MetricsSnapshot?
    /// The owner's timeout, for the operator's message.
    public var timeout: Duration

    public init(
        health: @escaping @Sendable () -> HealthReport, ownerAnswers: @escaping @Sendable () -> Bool,
        metrics: @escaping @Sendable () -> MetricsSnapshot?, timeout: Duration
    ) {
        self.health = health
        self.ownerAnswers = ownerAnswers
        self.metrics = metrics
        self.timeout = timeout
    }
}

/// The latest health and metrics, published by their owner and read by the status listener's thread — or, with
/// ``LiveStatus``, computed per request.
///
/// Threading: ``publish(health:metrics:)`` from the owner (any one thread or actor), ``response(method:path:)``
/// from the listener thread; a `Mutex` makes each publish atomic for readers.
///
/// Staleness: a snapshot older than `maxAge` makes `/healthz` unhealthy by itself — an owner that stopped
/// publishing (a hung coordinator) must not look healthy forever. Time comes from the injected `now`.
///
/// Live checks: with a `liveHealth` function, `/healthz` evaluates it on every request (on the listener's
/// thread; it must only read thread-safe state) in place of the published report, so a transport or a relay
/// going away shows at once rather than at the owner's next publish; the published snapshot then serves as
/// the owner's heartbeat (its staleness check still applies).
public final class StatusBoard: Sendable {
    private struct State {
        var health: HealthReport?
        var metrics = MetricsSnapshot()
        var publishedAt: ContinuousClock.Instant?
    }

    private let state = Mutex(State())
    private let now: @Sendable () -> ContinuousClock.Instant
    /// Stored once, never inside the `Mutex` (a closure read back out of a lock is re-wrapped on each read).
    private let liveHealth: (@Sendable () -> HealthReport)?
    private let live: LiveStatus?
    public let maxAge: Duration

    /// Health and metrics computed per request (``LiveStatus``); ``publish(health:metrics:)`` is not used.
    public init(live: LiveStatus) {
        self.live = live
        self.maxAge = live.timeout
        self.now = { .now }
        self.liveHealth = nil
    }

    /// `now` is the clock the staleness check reads (`{ ContinuousClock.now }` in the executable).
    public init(
        maxAge: Duration, now: @escaping @Sendable () -> ContinuousClock.Instant,
        liveHealth: (@Sendable () -> HealthReport)? = nil
    ) {
        self.maxAge = maxAge
        self.now = now
        self.liveHealth = liveHealth
        self.live = nil
    }

    public func publish(health: HealthReport, metrics: MetricsSnapshot) {
        let time = now()
        state.withLock { state in
            state.health = health
            state.metrics = metrics
            state.publishedAt = time
        }
    }

    /// Publishes metrics (and the owner's heartbeat) alone: with `liveHealth` set, the health is evaluated
    /// per request.
    public func publish(metrics: MetricsSnapshot) {
        let time = now()
        state.withLock { state in
            state.metrics = metrics
            state.publishedAt = time
        }
    }

    /// The health as served: the live report (or the published one) plus a `status` check for a missing or
    /// stale snapshot.
    public func currentHealth() -> HealthReport {
        if let live {
            var report = live.health()
            if !live.ownerAnswers() {
                report.checks.insert(
                    .init(name: "status", ok: false, detail: "the bridge did not answer within \(live.timeout.components.seconds) s"), at: 0)
            }
            return report
        }
        let (published, publishedAt) = state.withLock { ($0.health, $0.publishedAt) }
        guard let health = liveHealth?() ?? published, let publishedAt else {
            return HealthReport(checks: [.init(name: "status", ok: false, detail: "starting: no status published yet")])
        }
        let age = now() - publishedAt
        var report = health
        if age > maxAge {
            let seconds = Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18
            report.checks.insert(
                .init(name: "status", ok: false,
                      detail: "stale: last published \(Int(seconds)) s ago (limit \(maxAge.components.seconds) s)"),
                at: 0)
        }
        return report
    }

    public func currentMetrics() -> MetricsSnapshot { state.withLock { $0.metrics } }

    /// The answer to one request: `GET`/`HEAD` `/healthz` (200 or 503 with JSON) and `/metrics`
    /// (Prometheus text); 404 for other paths, 405 for other methods. A query string is ignored.
    public func response(method: String, path: String) -> HTTPResponse {
        guard method == "GET" || method == "HEAD" else {
            return HTTPResponse(status: 405, json: .object([("error", .string("only GET and HEAD"))]))
        }
        let route = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? path
        switch route {
        case "/healthz":
            let health = currentHealth()
            return HTTPResponse(status: health.isHealthy ? 200 : 503, json: health.json)
        case "/metrics":
            guard let metrics = live.map({ $0.metrics() }) ?? currentMetrics() else {
                return HTTPResponse(status: 503, json: .object([
                    ("error", .string("the bridge did not answer within \(maxAge.components.seconds) s")),
                ]))
            }
            return HTTPResponse(status: 200, contentType: PrometheusText.contentType, body: Array(PrometheusText.render(metrics).utf8))
        default:
            return HTTPResponse(status: 404, json: .object([
                ("error", .string("not found")), ("paths", .array([.string("/healthz"), .string("/metrics")])),
            ]))
        }
    }
}
