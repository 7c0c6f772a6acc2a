import BotSupport
import Bridge
import Testing

@Suite("Bridge health rule and metrics catalogue")
struct BridgeHealthTests {
    let start = ContinuousClock.now

    @Test("no relay: healthy within the grace, unhealthy at grace")
    func grace() {
        let health = BridgeHealth(startedAt: start, startupGrace: .seconds(30))
        let inputs = BridgeHealth.Inputs(connectedRelays: 0, configuredRelays: 3, meshUp: true, meshDetail: "tcp")
        let early = health.evaluate(inputs, now: start + .seconds(29))
        #expect(early.isHealthy)
        #expect(early.checks[0].detail == "0 of 3 connected (starting up)")
        let late = health.evaluate(inputs, now: start + .seconds(30))
        #expect(!late.isHealthy)
        #expect(late.reasons == ["relays: 0 of 3 connected (none connected after the 30 s startup grace)"])
    }

    @Test("one relay is enough; mesh down is unhealthy even in the grace")
    func meshAndRelays() {
        let health = BridgeHealth(startedAt: start)
        let up = health.evaluate(.init(connectedRelays: 1, configuredRelays: 5, meshUp: true, meshDetail: ""), now: start + .seconds(600))
        #expect(up.isHealthy)
        let meshDown = health.evaluate(.init(connectedRelays: 2, configuredRelays: 2, meshUp: false, meshDetail: "adapter hci0 off"), now: start)
        #expect(meshDown.reasons == ["mesh: down: adapter hci0 off"])
        #expect(meshDown.json["status"] == .string("unhealthy"))
    }

    @Test("metrics catalogue: every family declared, relay state set, labels sorted")
    func catalogue() throws {
        var m = BridgeMetrics()
        let empty = m.snapshot()
        for name in ["bridge_relay_up", "bridge_relay_state", "bridge_events_rejected_total", "bridge_hidden_total", "bridge_queue_depth",
                     "bridge_moderation_log_records", "bridge_stranger_cache_evictions_total", "bridge_mesh_links",
                     "bridge_mesh_relay_gate_total"] {
            #expect(empty.family(name) != nil, "\(name)")
        }
        m.relayStates = ["wss://b": "open", "wss://a": "backoff"]
        m.hidden[.init(direction: "uplink", rule: "rate")] = 4
        m.eventsRejected["bad_signature"] = 2
        m.meshRelayGate = ["withheld": 3, "released": 7]
        let s = m.snapshot()
        #expect(s.value("bridge_relay_state", labels: [.init("relay", "wss://a"), .init("state", "backoff")]) == 1)
        #expect(s.value("bridge_relay_state", labels: [.init("relay", "wss://a"), .init("state", "open")]) == 0)
        #expect(s.family("bridge_relay_state")?.samples.first?.labels.first?.value == "wss://a")
        #expect(s.value("bridge_relay_up", labels: [.init("relay", "wss://a")]) == 0)
        #expect(s.value("bridge_relay_up", labels: [.init("relay", "wss://b")]) == 1)
        // Every state is rendered, so a dashboard sees the transitions (failed = permanently failed).
        #expect(s.family("bridge_relay_state")?.samples.count == 2 * BridgeMetrics.relayStateNames.count)
        #expect(s.value("bridge_hidden_total", labels: [.init("direction", "uplink"), .init("rule", "rate")]) == 4)
        #expect(s.value("bridge_mesh_relay_gate_total", labels: [.init("outcome", "withheld")]) == 3)
        #expect(s.family("bridge_mesh_relay_gate_total")?.samples.first?.labels.first?.value == "released")
        // Round trip through the text format.
        #expect(try PrometheusText.parse(PrometheusText.render(s)) == s)
    }
}
