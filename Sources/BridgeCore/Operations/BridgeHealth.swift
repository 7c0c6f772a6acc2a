public import BotSupport

/// The bridge's `/healthz` rule: healthy when at least one relay is **answering** (connected and heard from
/// within the pool's answer window; or the bridge is still inside its startup grace and no relay has
/// answered yet) **and** the mesh transport says it is up.
///
/// Decisions (the issues leave them open):
/// - A bridge with zero answering relays after the grace is unhealthy even if the mesh works — it is not
///   bridging anything, and an orchestrator restart may well fix DNS or routes.
/// - A relay that upgraded and then stays silent is not up (issue 14): "connected" proves nothing, an
///   answer does (EOSE, any frame, or a PONG to the pool's probe).
/// - The grace covers the start only: once any relay has answered, losing every relay is unhealthy at
///   once, also within the first 30 s.
/// - A mesh that is down is unhealthy at once, grace or not: the radio-hub connection is there or not,
///   BlueZ registered our application or not. The detail is the transport's own line.
public struct BridgeHealth: Sendable {
    public struct Inputs: Sendable, Equatable {
        /// Relays connected and answering now.
        public var answeringRelays: Int
        public var configuredRelays: Int
        /// Whether any relay has answered since the start (ends the startup grace early).
        public var relaysHaveAnswered: Bool
        /// One line per relay that is not answering, e.g. "ws://a:7000: backoff (connect: refused)" (the
        /// runtime builds them from the pool's snapshot); at most ``Limits/listedRelays`` are shown.
        public var relayProblems: [String]
        public var meshUp: Bool
        /// The mesh transport's own detail (e.g. "1 of 1 hub connections up", "adapter hci0 is powered off").
        public var meshDetail: String

        public init(
            answeringRelays: Int, configuredRelays: Int, relaysHaveAnswered: Bool = false, relayProblems: [String] = [],
            meshUp: Bool, meshDetail: String
        ) {
            self.answeringRelays = answeringRelays
            self.configuredRelays = configuredRelays
            self.relaysHaveAnswered = relaysHaveAnswered
            self.relayProblems = relayProblems
            self.meshUp = meshUp
            self.meshDetail = meshDetail
        }
    }

    public enum Defaults {
        /// Time the relay side gets to open its first connection: DNS, TCP, TLS and the WebSocket upgrade to
        /// a distant relay, with one or two 1 s retries, fit in well under 30 s.
        public static let startupGrace: Duration = .seconds(30)
    }

    public enum Limits {
        /// Relays named in the relay check's detail: the body stays one short line even with the directory's
        /// dozens of relays configured; the rest are counted ("and N more").
        public static let listedRelays = 5
    }

    public let startedAt: ContinuousClock.Instant
    public let startupGrace: Duration

    public init(startedAt: ContinuousClock.Instant, startupGrace: Duration = Defaults.startupGrace) {
        self.startedAt = startedAt
        self.startupGrace = startupGrace
    }

    public func evaluate(_ inputs: Inputs, now: ContinuousClock.Instant) -> HealthReport {
        let inGrace = now - startedAt < startupGrace && !inputs.relaysHaveAnswered
        let relaysOK = inputs.answeringRelays >= 1 || inGrace
        var relayDetail = "\(inputs.answeringRelays) of \(inputs.configuredRelays) answering"
        if inputs.answeringRelays == 0 {
            if inGrace {
                relayDetail += " (starting up)"
            } else if !inputs.relaysHaveAnswered {
                relayDetail += " (none answered within the \(startupGrace.components.seconds) s startup grace)"
            }
        }
        if !inputs.relayProblems.isEmpty {
            let listed = inputs.relayProblems.prefix(Limits.listedRelays)
            relayDetail += "; " + listed.joined(separator: "; ")
            if inputs.relayProblems.count > listed.count { relayDetail += "; and \(inputs.relayProblems.count - listed.count) more" }
        }
        return HealthReport(checks: [
            .init(name: "relays", ok: relaysOK, detail: relayDetail),
            .init(name: "mesh", ok: inputs.meshUp, detail: (inputs.meshUp ? "up" : "down") + (inputs.meshDetail.isEmpty ? "" : ": " + inputs.meshDetail)),
        ])
    }
}
