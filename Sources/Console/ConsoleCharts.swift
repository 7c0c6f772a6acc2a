public import BotSupport
public import Bridge
import Synchronization

/// The console's charts as data: the last ``Limits/minutes`` one-minute buckets of what the bridge did — forwarded
/// per minute by direction, hidden per minute by direction and rule, relays up, mesh peers, queue depths.
///
/// A pure value with the clock passed in (``record(_:at:)``, ``jsonValue(now:)``). It is fed the bridge's own
/// figures (``BridgeMetrics``, the typed counters the status loop gathers every 2 s for `/metrics`), so it counts
/// nothing itself: a minute's forwarded and hidden are the growth of the cumulative counters between readings.
///
/// Decisions:
/// - The keeper starts with the bridge, whose counters start at zero, so the first reading's counts belong to the
///   first reading's minute (the baseline is zero, not the first reading).
/// - A counter lower than its last reading has restarted from zero (a restart of whatever owns it): its growth is
///   its new value, never a negative count.
/// - Readings are attributed to the minute they are taken in. After a gap (no reading for minutes: the loop was
///   stalled) the growth over the gap lands in the minute of the next reading; the minutes of the gap have no
///   bucket and are `null` in the JSON (a gap in the line), never a made-up zero.
/// - A wall clock that steps back does not rewrite history: a reading is never put before the newest bucket.
/// - Gauges keep, per minute: relays up the lowest reading (one relay down for part of the minute shows), mesh
///   peers the last, each queue depth the highest (a burst that drained within the minute still shows).
public struct ChartSeries: Sendable, Equatable {
    public enum Limits {
        /// One hour of one-minute buckets (the charts; the denylist preview's hour too).
        public static let minutes = 60
        public static let minuteSeconds = 60.0
        /// Keys per family (directions, direction × rule, queues). The bridge's label sets are typed and small
        /// (2 directions × 8 rules, under 10 queues); this only bounds memory if that ever changes.
        public static let maxKeys = 64
    }

    /// What one status tick reads: counters since the bridge started, gauges as they are now.
    public struct Reading: Sendable, Equatable {
        /// `direction → count since start`.
        public var forwarded: [String: Int] = [:]
        /// `(direction, rule) → count since start`.
        public var hidden: [BridgeMetrics.HiddenKey: Int] = [:]
        public var relaysUp = 0
        public var relaysConfigured = 0
        public var meshPeers = 0
        /// `queue → items waiting`.
        public var queueDepths: [BridgeMetrics.Queue: Int] = [:]

        public init() {}

        /// The figures of one status tick, as `/metrics` renders them (relays up: state `open`).
        public init(_ metrics: BridgeMetrics) {
            forwarded = metrics.forwarded
            hidden = metrics.hidden
            relaysUp = metrics.relays.values.filter { $0.state == "open" }.count
            relaysConfigured = metrics.relays.count
            meshPeers = metrics.meshPeers
            queueDepths = metrics.queueDepths
        }
    }

    struct Bucket: Sendable, Equatable {
        var readings = 0
        var forwarded: [String: Int] = [:]
        var hidden: [BridgeMetrics.HiddenKey: Int] = [:]
        var relaysUp = Int.max
        var relaysConfigured = 0
        var meshPeers = 0
        var queueDepths: [BridgeMetrics.Queue: Int] = [:]
    }

    /// Minute number (Unix seconds / 60, rounded down) → its bucket; at most ``Limits/minutes`` of them.
    private(set) var buckets: [Int64: Bucket] = [:]
    private var lastForwarded: [String: Int] = [:]
    private var lastHidden: [BridgeMetrics.HiddenKey: Int] = [:]
    private var newestMinute: Int64?

    public init() {}

    static func minute(_ unixSeconds: Double) -> Int64 { Int64((unixSeconds / Limits.minuteSeconds).rounded(.down)) }

    /// Adds one reading taken at `unixSeconds`.
    public mutating func record(_ reading: Reading, at unixSeconds: Double) {
        let minute = max(Self.minute(unixSeconds), newestMinute ?? .min)
        newestMinute = minute
        var bucket = buckets[minute] ?? Bucket()
        bucket.readings += 1
        Self.add(reading.forwarded, last: &lastForwarded, into: &bucket.forwarded)
        Self.add(reading.hidden, last: &lastHidden, into: &bucket.hidden)
        bucket.relaysUp = min(bucket.relaysUp, reading.relaysUp)
        bucket.relaysConfigured = reading.relaysConfigured
        bucket.meshPeers = reading.meshPeers
        for (queue, depth) in reading.queueDepths where bucket.queueDepths[queue] != nil || bucket.queueDepths.count < Limits.maxKeys {
            bucket.queueDepths[queue] = max(bucket.queueDepths[queue] ?? 0, depth)
        }
        buckets[minute] = bucket
        let oldestKept = minute - Int64(Limits.minutes) + 1
        buckets = buckets.filter { $0.key >= oldestKept }
    }

    /// Adds each counter's growth since its last reading to `bucket`; keys beyond ``Limits/maxKeys`` are not kept.
    static func add<Key: Hashable>(_ counters: [Key: Int], last: inout [Key: Int], into bucket: inout [Key: Int]) {
        for (key, value) in counters where last[key] != nil || last.count < Limits.maxKeys {
            bucket[key, default: 0] += growth(value, since: last[key])
            last[key] = value
        }
    }

    /// A counter's growth since its last reading; a lower value means it restarted from zero.
    static func growth(_ value: Int, since last: Int?) -> Int {
        guard let last else { return max(0, value) }
        return value >= last ? value - last : max(0, value)
    }

    /// The hour ending with the minute of `now` (or the newest bucket, if the clock stepped back), oldest first:
    /// `minutes` (each one's start, Unix seconds), `readings` per minute, and each series' values, `null` where a
    /// minute had no reading.
    public func jsonValue(now: Double) -> JSONValue {
        let last = max(Self.minute(now), newestMinute ?? .min)
        let minutes = (0..<Int64(Limits.minutes)).map { last - Int64(Limits.minutes) + 1 + $0 }
        let shown = minutes.map { buckets[$0] }
        func values(_ value: (Bucket) -> Int?) -> JSONValue {
            .array(shown.map { bucket in bucket.flatMap(value).map { .integer(Int64($0)) } ?? .null })
        }
        let directions = Set(shown.compactMap { $0 }.flatMap(\.forwarded.keys)).sorted()
        let hiddenKeys = Set(shown.compactMap { $0 }.flatMap(\.hidden.keys)).sorted { ($0.direction, $0.rule) < ($1.direction, $1.rule) }
        let queues = Set(shown.compactMap { $0 }.flatMap(\.queueDepths.keys)).sorted { $0.rawValue < $1.rawValue }
        return .object([
            ("minute_seconds", .double(Limits.minuteSeconds)), ("now", .double(now)),
            ("minutes", .array(minutes.map { .integer($0 * Int64(Limits.minuteSeconds)) })),
            ("readings", values { $0.readings }),
            ("forwarded", .array(directions.map { d in
                .object([("direction", .string(d)), ("values", values { $0.forwarded[d] ?? 0 })])
            })),
            ("hidden", .array(hiddenKeys.map { k in
                .object([("direction", .string(k.direction)), ("rule", .string(k.rule)), ("values", values { $0.hidden[k] ?? 0 })])
            })),
            ("relays_up", values { $0.relaysUp == .max ? nil : $0.relaysUp }),
            ("relays_configured", values { $0.relaysConfigured }),
            ("mesh_peers", values { $0.meshPeers }),
            ("queue_depths", .array(queues.map { q in .object([("queue", .string(q.rawValue)), ("values", values { $0.queueDepths[q] ?? 0 })]) })),
        ])
    }
}

/// The running bridge's ``ChartSeries``: fed by the status loop every 2 s, read by `GET /api/charts`.
public final class ConsoleCharts: Sendable {
    private let series = Mutex(ChartSeries())

    public init() {}

    public func record(_ metrics: BridgeMetrics, at unixSeconds: Double) {
        let reading = ChartSeries.Reading(metrics)
        series.withLock { $0.record(reading, at: unixSeconds) }
    }

    public func jsonValue(now: Double) -> JSONValue { series.withLock { $0.jsonValue(now: now) } }
}
