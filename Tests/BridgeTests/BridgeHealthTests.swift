import BotSupport
import Bridge
import Testing
import BridgeCore

@Suite("Bridge health rule and metrics catalogue")
struct BridgeHealthTests {
    let start = ContinuousClock.now

    @Test("no relay answering: healthy within the grace, unhealthy at grace")
    func grace() {
        let health = BridgeHealth(startedAt: start, startupGrace: .seconds(30))
        let inputs = BridgeHealth.Inputs(answeringRelays: 0, configuredRelays: 3, meshUp: true, meshDetail: "tcp")
        let early = health.evaluate(inputs, now: start + .seconds(29))
        #expect(early.isHealthy)
        #expect(early.checks[0].detail == "0 of 3 answering (starting up)")
        let late = health.evaluate(inputs, now: start + .seconds(30))
        #expect(!late.isHealthy)
        #expect(late.reasons == ["relays: 0 of 3 answering (none answered within the 30 s startup grace)"])
    }

    @Test("the grace ends at the first answer: a relay lost after it is unhealthy at once, with each relay's reason")
    func graceEndsAtFirstAnswer() {
        let health = BridgeHealth(startedAt: start, startupGrace: .seconds(30))
        let lost = BridgeHealth.Inputs(
            answeringRelays: 0, configuredRelays: 2, relaysHaveAnswered: true,
            relayProblems: ["ws://a: backoff (connect: refused)", "ws://b: open, silent for 50 s"], meshUp: true, meshDetail: "")
        let report = health.evaluate(lost, now: start + .seconds(5))
        #expect(!report.isHealthy)
        #expect(report.reasons == ["relays: 0 of 2 answering; ws://a: backoff (connect: refused); ws://b: open, silent for 50 s"])
        // Many relays: the first few are named, the rest counted.
        var many = lost
        many.relayProblems = (0..<9).map { "ws://r\($0): connecting" }
        let detail = health.evaluate(many, now: start).checks[0].detail
        #expect(detail.hasSuffix("ws://r4: connecting; and 4 more"), "\(detail)")
    }

    @Test("one answering relay is enough; mesh down is unhealthy even in the grace")
    func meshAndRelays() {
        let health = BridgeHealth(startedAt: start)
        let up = health.evaluate(.init(answeringRelays: 1, configuredRelays: 5, meshUp: true, meshDetail: ""), now: start + .seconds(600))
        #expect(up.isHealthy)
        let meshDown = health.evaluate(.init(answeringRelays: 2, configuredRelays: 2, meshUp: false, meshDetail: "adapter hci0 off"), now: start)
        #expect(meshDown.reasons == ["mesh: down: adapter hci0 off"])
        #expect(meshDown.json["status"] == .string("unhealthy"))
    }

    @Test("metrics catalogue: every family declared, relay state set, labels sorted")
    func catalogue() throws {
        var m = BridgeMetrics()
        let empty = m.snapshot()
        for name in ["bitchat_bridge_relay_up", "bitchat_bridge_relay_state", "bitchat_bridge_events_rejected_total", "bitchat_bridge_hidden_total", "bitchat_bridge_queue_depth",
                     "bitchat_bridge_moderation_log_records", "bitchat_bridge_stranger_cache_evictions_total", "bitchat_bridge_mesh_links",
                     "bitchat_bridge_mesh_relay_gate_total"] {
            #expect(empty.family(name) != nil, "\(name)")
        }
        var a = BridgeMetrics.RelayFigures()
        a.state = "backoff"
        var b = BridgeMetrics.RelayFigures()
        b.state = "open"
        b.answering = true
        b.drops = ["stale": 2, "bad_signature": 1]
        m.relays = ["wss://b": b, "wss://a": a]
        m.hidden[.init(direction: "uplink", rule: "rate")] = 4
        m.eventsRejected["bad_signature"] = 2
        let s = m.snapshot()
        #expect(s.value("bitchat_bridge_relay_state", labels: [.init("relay", "wss://a"), .init("state", "backoff")]) == 1)
        #expect(s.value("bitchat_bridge_relay_state", labels: [.init("relay", "wss://a"), .init("state", "open")]) == 0)
        #expect(s.family("bitchat_bridge_relay_state")?.samples.first?.labels.first?.value == "wss://a")
        #expect(s.value("bitchat_bridge_relay_up", labels: [.init("relay", "wss://a")]) == 0)
        #expect(s.value("bitchat_bridge_relay_up", labels: [.init("relay", "wss://b")]) == 1)
        // Every state is rendered, so a dashboard sees the transitions (failed = permanently failed).
        #expect(s.family("bitchat_bridge_relay_state")?.samples.count == 2 * BridgeMetrics.relayStateNames.count)
        #expect(s.value("bitchat_bridge_hidden_total", labels: [.init("direction", "uplink"), .init("rule", "rate")]) == 4)
        #expect(s.value("bitchat_bridge_relay_answering", labels: [.init("relay", "wss://a")]) == 0)
        #expect(s.value("bitchat_bridge_relay_answering", labels: [.init("relay", "wss://b")]) == 1)
        #expect(s.value("bitchat_bridge_relay_dropped_total", labels: [.init("relay", "wss://b"), .init("reason", "stale")]) == 2)
        #expect(s.family("bitchat_bridge_relay_dropped_total")?.samples.count == 2)
        // Round trip through the text format.
        #expect(try PrometheusText.parse(PrometheusText.render(s)) == s)
    }
}
