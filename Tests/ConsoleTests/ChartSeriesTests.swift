import BotSupport
import Bridge
@testable import Console
import Testing
import WebSocketRuntime

@Suite("Charts: per-minute series from the bridge's counters (clock injected)")
struct ChartSeriesTests {
    static let t0 = 1_750_000_040.0  // 20 s into a minute
    static let minute0 = Int64(1_750_000_040 / 60) * 60

    static func reading(forwarded down: Int, up: Int = 0, hidden: [(String, String, Int)] = [], relays: Int = 2, peers: Int = 3,
                        downlinkQueue: Int = 0) -> ChartSeries.Reading {
        var r = ChartSeries.Reading()
        r.forwarded = ["nostr-to-mesh": down, "mesh-to-nostr": up]
        for (direction, rule, count) in hidden { r.hidden[.init(direction: direction, rule: rule)] = count }
        r.relaysUp = relays
        r.relaysConfigured = 2
        r.meshPeers = peers
        r.queueDepths = [.downlink: downlinkQueue]
        return r
    }

    static func series(_ json: JSONValue, _ family: String, _ match: [String: String]) -> [JSONValue]? {
        json[family]?.arrayValue?.first { entry in match.allSatisfy { entry[$0.key] == .string($0.value) } }?["values"]?.arrayValue
    }

    @Test func countersBecomePerMinuteGrowthAndTheMinuteRollsOver() throws {
        var s = ChartSeries()
        // Minute 0: readings every 2 s; the counters start at zero with the keeper, so the first reading counts.
        s.record(Self.reading(forwarded: 4, hidden: [("nostr-to-mesh", "messageRate", 1)], downlinkQueue: 5), at: Self.t0)
        s.record(Self.reading(forwarded: 6, hidden: [("nostr-to-mesh", "messageRate", 3)], relays: 1, downlinkQueue: 1), at: Self.t0 + 2)
        // Minute 1 (t0 + 40 s is 60 s into minute 0, i.e. the next minute): growth since the last reading only.
        s.record(Self.reading(forwarded: 7, up: 2, hidden: [("nostr-to-mesh", "messageRate", 3), ("mesh-to-nostr", "blocked", 1)], peers: 4),
                 at: Self.t0 + 40)
        let json = s.jsonValue(now: Self.t0 + 41)
        let minutes = try #require(json["minutes"]?.arrayValue)
        #expect(minutes.count == ChartSeries.Limits.minutes)
        #expect(minutes.last == .integer(Self.minute0 + 60) && minutes[58] == .integer(Self.minute0))
        let down = try #require(Self.series(json, "forwarded", ["direction": "nostr-to-mesh"]))
        #expect(down.suffix(2) == [.integer(6), .integer(1)])
        #expect(down.prefix(58).allSatisfy { $0 == .null }, "minutes without a reading are gaps")
        #expect(Self.series(json, "forwarded", ["direction": "mesh-to-nostr"])?.suffix(2) == [.integer(0), .integer(2)])
        #expect(Self.series(json, "hidden", ["direction": "nostr-to-mesh", "rule": "messageRate"])?.suffix(2) == [.integer(3), .integer(0)])
        #expect(Self.series(json, "hidden", ["direction": "mesh-to-nostr", "rule": "blocked"])?.suffix(2) == [.integer(0), .integer(1)])
        // Gauges: relays up the lowest of the minute, peers the last, queue depth the highest.
        #expect(json["relays_up"]?.arrayValue?.suffix(2) == [.integer(1), .integer(2)])
        #expect(json["mesh_peers"]?.arrayValue?.suffix(2) == [.integer(3), .integer(4)])
        #expect(Self.series(json, "queue_depths", ["queue": "downlink"])?.suffix(2) == [.integer(5), .integer(0)])
        #expect(json["readings"]?.arrayValue?.suffix(2) == [.integer(2), .integer(1)])

        // An hour later the old minutes have left the window and are no longer kept.
        s.record(Self.reading(forwarded: 9, up: 2), at: Self.t0 + 3660)
        #expect(s.buckets.count == 1)
        let later = s.jsonValue(now: Self.t0 + 3661)
        #expect(Self.series(later, "forwarded", ["direction": "nostr-to-mesh"])?.last == .integer(2))
        #expect(later["readings"]?.arrayValue?.filter { $0 != .null }.count == 1)
    }

    @Test func aCounterThatGoesDownRestartedFromZero() {
        var s = ChartSeries()
        s.record(Self.reading(forwarded: 100), at: Self.t0)
        // A restart of the counter's owner: 3 since then, not −97.
        s.record(Self.reading(forwarded: 3), at: Self.t0 + 2)
        s.record(Self.reading(forwarded: 5), at: Self.t0 + 4)
        let json = s.jsonValue(now: Self.t0 + 5)
        #expect(Self.series(json, "forwarded", ["direction": "nostr-to-mesh"])?.last == .integer(105))
        #expect(ChartSeries.growth(3, since: 100) == 3 && ChartSeries.growth(7, since: 5) == 2 && ChartSeries.growth(4, since: nil) == 4)
    }

    @Test func aGapStaysAGapAndItsGrowthLandsInTheNextReadingsMinute() {
        var s = ChartSeries()
        s.record(Self.reading(forwarded: 1), at: Self.t0)
        // No reading for three minutes (a stalled loop), then one.
        s.record(Self.reading(forwarded: 11), at: Self.t0 + 240)
        let json = s.jsonValue(now: Self.t0 + 240)
        let down = Self.series(json, "forwarded", ["direction": "nostr-to-mesh"]) ?? []
        #expect(Array(down.suffix(5)) == [.integer(1), .null, .null, .null, .integer(10)])
        #expect(Array(json["relays_up"]?.arrayValue?.suffix(5) ?? []) == [.integer(2), .null, .null, .null, .integer(2)])
        // Asked later with no new reading: the newest minutes are gaps too.
        let quiet = s.jsonValue(now: Self.t0 + 360)
        #expect(Array((Self.series(quiet, "forwarded", ["direction": "nostr-to-mesh"]) ?? []).suffix(3)) == [.integer(10), .null, .null])
    }

    @Test func aClockThatStepsBackNeverRewritesAnEarlierMinute() {
        var s = ChartSeries()
        s.record(Self.reading(forwarded: 2), at: Self.t0 + 60)
        s.record(Self.reading(forwarded: 5), at: Self.t0)  // the wall clock stepped back a minute
        let json = s.jsonValue(now: Self.t0)
        let down = Self.series(json, "forwarded", ["direction": "nostr-to-mesh"]) ?? []
        #expect(Array(down.suffix(2)) == [.null, .integer(5)])
        #expect(s.buckets.count == 1)
    }

    @Test func labelSetsAreBounded() {
        var s = ChartSeries()
        var r = ChartSeries.Reading()
        for i in 0..<(ChartSeries.Limits.maxKeys * 3) { r.hidden[.init(direction: "nostr-to-mesh", rule: "r\(i)")] = 1 }
        s.record(r, at: Self.t0)
        #expect(s.jsonValue(now: Self.t0)["hidden"]?.arrayValue?.count == ChartSeries.Limits.maxKeys)
    }

    @Test func aReadingIsTheMetricsOfOneStatusTick() {
        var metrics = BridgeMetrics()
        metrics.forwarded = ["nostr-to-mesh": 3]
        metrics.hidden = [.init(direction: "nostr-to-mesh", rule: "denylist"): 2]
        var open = BridgeMetrics.RelayFigures()
        open.state = "open"
        metrics.relays = ["ws://a": open, "ws://b": BridgeMetrics.RelayFigures()]
        metrics.meshPeers = 7
        metrics.queueDepths = [.uplink: 4]
        let r = ChartSeries.Reading(metrics)
        #expect(r.relaysUp == 1 && r.relaysConfigured == 2 && r.meshPeers == 7 && r.queueDepths == [.uplink: 4])
        #expect(r.forwarded == ["nostr-to-mesh": 3] && r.hidden[.init(direction: "nostr-to-mesh", rule: "denylist")] == 2)
    }
}
