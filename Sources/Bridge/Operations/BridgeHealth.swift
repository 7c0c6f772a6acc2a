public import BotSupport

/// The bridge's `/healthz` rule: healthy when the relay side has at least one connected relay (or is
/// still inside its startup grace) **and** the mesh transport is up.
///
/// Decision (the issue leaves it open): a bridge with zero relays after the grace is unhealthy even if
/// the mesh works — it is not bridging anything, and an orchestrator restart may well fix DNS or routes.
/// A mesh that is down is unhealthy at once, grace or not: BlueZ either registered our service or not.
public struct BridgeHealth: Sendable {
    public struct Inputs: Sendable, Equatable {
        public var connectedRelays: Int
        public var configuredRelays: Int
        public var meshUp: Bool
        /// Shown as the mesh check's detail (e.g. "bluez hci0, 3 links", "adapter not powered").
        public var meshDetail: String

        public init(connectedRelays: Int, configuredRelays: Int, meshUp: Bool, meshDetail: String) {
            self.connectedRelays = connectedRelays
            self.configuredRelays = configuredRelays
            self.meshUp = meshUp
            self.meshDetail = meshDetail
        }
    }

    public enum Defaults {
        /// Time the relay side gets to open its first connection: DNS, TCP, TLS and the WebSocket upgrade to
        /// a distant relay, with one or two 1 s retries, fit in well under 30 s.
        public static let startupGrace: Duration = .seconds(30)
    }

    public let startedAt: ContinuousClock.Instant
    public let startupGrace: Duration

    public init(startedAt: ContinuousClock.Instant, startupGrace: Duration = Defaults.startupGrace) {
        self.startedAt = startedAt
        self.startupGrace = startupGrace
    }

    public func evaluate(_ inputs: Inputs, now: ContinuousClock.Instant) -> HealthReport {
        let inGrace = now - startedAt < startupGrace
        let relaysOK = inputs.connectedRelays >= 1 || inGrace
        var relayDetail = "\(inputs.connectedRelays) of \(inputs.configuredRelays) connected"
        if inputs.connectedRelays == 0 {
            relayDetail += inGrace ? " (starting up)" : " (none connected after the \(startupGrace.components.seconds) s startup grace)"
        }
        return HealthReport(checks: [
            .init(name: "relays", ok: relaysOK, detail: relayDetail),
            .init(name: "mesh", ok: inputs.meshUp, detail: (inputs.meshUp ? "up" : "down") + (inputs.meshDetail.isEmpty ? "" : ": " + inputs.meshDetail)),
        ])
    }
}
