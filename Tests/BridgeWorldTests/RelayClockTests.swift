import BotSupport
import BridgeTesting
import Testing

/// The relay's clock as the bridge sees it (issue 23, doctor): the `Date` header of each relay's upgrade answer, read
/// by the real pool, on `/metrics` as `bitchat_bridge_relay_clock_offset_seconds` — a Pi that lost network time
/// mid-festival shows there before phones start dropping what it posts (±900 s).
@Suite("World: relay clocks")
struct RelayClockTests {
    @Test("a relay 20 minutes behind shows as −1,200 s on /metrics; one on time as about 0")
    func clockOffsetOnMetrics() async throws {
        let site = Site(name: "relay-clock")
        let late = try site.relay(), onTime = try site.relay()
        late.setClockOffset(-1_200)
        let bridge = try await site.bridge("bridge", relays: [late, onTime], segments: [site.segment()])
        let metrics = try await bridge.metrics()
        func offset(_ relay: LoopbackRelay) -> Double? {
            metrics.value("bitchat_bridge_relay_clock_offset_seconds", labels: [.init("relay", relay.url)])
        }
        // The relays tell the site's clock (Site.relay()), so the offsets are exact.
        #expect(offset(late) == -1_200, "the late relay's series is on /metrics")
        #expect(offset(onTime) == 0)
        await site.stop()
    }
}
