public import BotSupport

/// The bridge's operational counters and gauges, owned by the coordinator and turned into a
/// ``MetricsSnapshot`` each time it publishes status (every few seconds and on demand).
///
/// A plain value: the owner mutates its copy on its own actor; ``snapshot()`` names and labels every
/// series in one place, so the `/metrics` catalogue below is the single list operators read.
///
/// | metric | kind | labels |
/// |---|---|---|
/// | `bridge_relay_up` | gauge (1 = connected, 0 = not) | relay |
/// | `bridge_relay_state` | gauge (1 for the current state) | relay, state |
/// | `bridge_relay_reconnects_total` | counter | relay |
/// | `bridge_events_received_total` | counter | — |
/// | `bridge_events_verified_total` | counter | — |
/// | `bridge_events_rejected_total` | counter | reason |
/// | `bridge_forwarded_total` | counter | direction |
/// | `bridge_hidden_total` | counter | direction, rule |
/// | `bridge_deposits_total` | counter | — |
/// | `bridge_queue_depth` | gauge | queue |
/// | `bridge_queue_dropped_total` | counter | queue |
/// | `bridge_mesh_peers` / `bridge_mesh_links` | gauge | — |
/// | `bridge_mesh_relay_gate_total` | counter | outcome (released, withheld, expired, overflow, cachedRelay, cachedWithhold) |
/// | `bridge_stranger_cache_entries` / `bridge_stranger_cache_evictions_total` | gauge / counter | — |
/// | `bridge_moderation_log_records` | gauge | — |
/// | `bridge_uptime_seconds` | gauge | — |
public struct BridgeMetrics: Sendable, Equatable {
    /// `relay URL → state name` (one of ``relayStateNames``; `open` = connected).
    public var relayStates: [String: String] = [:]
    public var relayReconnects: [String: Int] = [:]
    public var eventsReceived = 0
    public var eventsVerified = 0
    /// `reason → count` (e.g. `bad_signature`, `stale`, `duplicate`).
    public var eventsRejected: [String: Int] = [:]
    /// `direction → count` (`downlink`, `uplink`, …).
    public var forwarded: [String: Int] = [:]
    /// `(direction, rule) → count`.
    public var hidden: [HiddenKey: Int] = [:]
    public var deposits = 0
    public var queueDepths: [String: Int] = [:]
    public var queueDrops: [String: Int] = [:]
    public var meshPeers = 0
    public var meshLinks = 0
    /// The mesh engine's relay gate (public messages held for the bridge's verdict): `outcome → count`.
    public var meshRelayGate: [String: Int] = [:]
    public var strangerCacheEntries = 0
    public var strangerCacheEvictions = 0
    public var moderationLogRecords = 0
    public var uptimeSeconds = 0.0

    public struct HiddenKey: Hashable, Sendable {
        public var direction: String
        public var rule: String

        public init(direction: String, rule: String) {
            self.direction = direction
            self.rule = rule
        }
    }

    /// The states a relay can be reported in; every one is rendered (0 or 1) so dashboards see transitions.
    public static let relayStateNames = ["connecting", "open", "backoff", "failed", "closed"]

    public init() {}

    public func snapshot() -> MetricsSnapshot {
        typealias Label = MetricsSnapshot.Label
        var s = MetricsSnapshot()
        s.declare("bridge_relay_up", "1 while the relay connection is open, else 0.", kind: .gauge)
        for relay in relayStates.keys.sorted() {
            s.gauge("bridge_relay_up", "", labels: [Label("relay", relay)], relayStates[relay] == "open" ? 1 : 0)
        }
        s.declare("bridge_relay_state", "Current state of each relay connection (1 = in this state).", kind: .gauge)
        for relay in relayStates.keys.sorted() {
            let current = relayStates[relay] ?? ""
            var names = Self.relayStateNames
            if !names.contains(current) { names.append(current) }
            for state in names {
                s.gauge("bridge_relay_state", "", labels: [Label("relay", relay), Label("state", state)],
                        state == current ? 1 : 0)
            }
        }
        s.declare("bridge_relay_reconnects_total", "Reconnections per relay since start.", kind: .counter)
        for (relay, count) in relayReconnects.sorted(by: { $0.key < $1.key }) {
            s.counter("bridge_relay_reconnects_total", "", labels: [Label("relay", relay)], Double(count))
        }
        s.counter("bridge_events_received_total", "Nostr events received from relays (before checks).", Double(eventsReceived))
        s.counter("bridge_events_verified_total", "Nostr events whose id and signature verified.", Double(eventsVerified))
        s.declare("bridge_events_rejected_total", "Nostr events rejected, by reason.", kind: .counter)
        for (reason, count) in eventsRejected.sorted(by: { $0.key < $1.key }) {
            s.counter("bridge_events_rejected_total", "", labels: [Label("reason", reason)], Double(count))
        }
        s.declare("bridge_forwarded_total", "Messages carried across, by direction.", kind: .counter)
        for (direction, count) in forwarded.sorted(by: { $0.key < $1.key }) {
            s.counter("bridge_forwarded_total", "", labels: [Label("direction", direction)], Double(count))
        }
        s.declare("bridge_hidden_total", "Messages hidden by the spam filter, by direction and rule.", kind: .counter)
        let hiddenSorted = hidden.sorted { ($0.key.direction, $0.key.rule) < ($1.key.direction, $1.key.rule) }
        for (key, count) in hiddenSorted {
            s.counter("bridge_hidden_total", "", labels: [Label("direction", key.direction), Label("rule", key.rule)],
                      Double(count))
        }
        s.counter("bridge_deposits_total", "Deposits from mesh-only phones published to relays.", Double(deposits))
        s.declare("bridge_queue_depth", "Items waiting in each queue.", kind: .gauge)
        for (queue, depth) in queueDepths.sorted(by: { $0.key < $1.key }) {
            s.gauge("bridge_queue_depth", "", labels: [Label("queue", queue)], Double(depth))
        }
        s.declare("bridge_queue_dropped_total", "Items dropped because a queue was full, by queue.", kind: .counter)
        for (queue, drops) in queueDrops.sorted(by: { $0.key < $1.key }) {
            s.counter("bridge_queue_dropped_total", "", labels: [Label("queue", queue)], Double(drops))
        }
        s.gauge("bridge_mesh_peers", "Mesh peers currently known (announced, not expired).", Double(meshPeers))
        s.gauge("bridge_mesh_links", "Direct BLE links currently open.", Double(meshLinks))
        s.declare("bridge_mesh_relay_gate_total", "Public mesh messages held for the verdict, by what became of them.", kind: .counter)
        for (outcome, count) in meshRelayGate.sorted(by: { $0.key < $1.key }) {
            s.counter("bridge_mesh_relay_gate_total", "", labels: [Label("outcome", outcome)], Double(count))
        }
        s.gauge("bridge_stranger_cache_entries", "Identities held in the bounded stranger cache.", Double(strangerCacheEntries))
        s.counter("bridge_stranger_cache_evictions_total", "Identities evicted from the stranger cache.",
                  Double(strangerCacheEvictions))
        s.gauge("bridge_moderation_log_records", "Records in the moderation log.", Double(moderationLogRecords))
        s.gauge("bridge_uptime_seconds", "Seconds since the bridge started.", uptimeSeconds)
        return s
    }
}
