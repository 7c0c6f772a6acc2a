import BotSupport
import Bridge
import BitchatWire
import Foundation
@testable import Mesh
@testable import MeshRuntime
import Testing

/// The metric table (docs/operations.md, linked from the README) and the catalogue are one list (issue 15: "The
/// README's metric list is checked against the catalogue").
@Suite("Metrics catalogue")
struct MetricsCatalogueTests {
    /// `| `name` | kind | labels | what |` rows between the metrics-table markers of docs/operations.md.
    static func readmeRows() throws -> [(name: String, kind: String, labels: [String])] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        guard let start = text.range(of: "<!-- metrics-table"), let end = text.range(of: "<!-- /metrics-table -->") else {
            return []
        }
        return text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5, cells[1].hasPrefix("`bitchat_bridge_") || cells[1].hasPrefix("`process_") else { return nil }
            let labels = cells[3] == "—" ? [] : cells[3].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            return (cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`")), cells[2], labels)
        }
    }

    static func row(_ metric: BridgeMetric) -> String {
        "| `\(metric.rawValue)` | \(metric.kind.rawValue) | \(metric.labels.isEmpty ? "—" : metric.labels.joined(separator: ", ")) | \(metric.help) |"
    }

    @Test("every catalogue family is in the README table with its kind and labels, and nothing else is")
    func readmeMatchesCatalogue() throws {
        let rows = try Self.readmeRows()
        let expected = BridgeMetric.allCases.map { ($0.rawValue, $0.kind.rawValue, $0.labels) }
        let same = rows.count == expected.count && zip(rows, expected).allSatisfy { $0.name == $1.0 && $0.kind == $1.1 && $0.labels == $1.2 }
        #expect(same, "docs/operations.md metric table out of date; expected rows:\n\(BridgeMetric.allCases.map(Self.row).joined(separator: "\n"))")
    }

    @Test("an empty snapshot declares every family and nothing else; every series fits its family's labels")
    func snapshotDeclaresCatalogue() throws {
        let empty = BridgeMetrics().snapshot()
        #expect(empty.families.map(\.name) == BridgeMetric.allCases.map(\.rawValue))
        var filled = BridgeMetrics()
        var relay = BridgeMetrics.RelayFigures()
        relay.state = "open"
        relay.answering = true
        relay.reconnects = 2
        relay.framesReceived = 9
        relay.eventsReceived = 7
        relay.drops = ["stale": 1, "future": 1]
        relay.failures = ["connect": 1]
        relay.losses = ["closed": 1]
        relay.okRejected = ["pow": 1]
        relay.closed = ["rate-limited": 1]
        filled.relays = ["wss://a": relay]
        filled.eventsRejected = ["bad_signature": 1]
        filled.eventsDropped = ["stale": 3]
        filled.forwarded = ["nostr-to-mesh": 1]
        filled.hidden[.init(direction: "nostr-to-mesh", rule: "blocked")] = 1
        filled.depositsDropped = ["loop": 1]
        filled.carriersDropped = ["role_off": 1]
        filled.presenceSent = ["channel": 1]
        filled.queueDepths = [.downlink: 1]
        filled.queueDrops = [.downlink: 1]
        filled.meshTransport = Self.transportStatus()
        filled.mesh = Self.meshCounters()
        filled.meshNode.droppedActions = 1
        filled.storeFailures = [.recentEvents: 1]
        let snapshot = filled.snapshot()
        for metric in BridgeMetric.allCases {
            let family = try #require(snapshot.family(metric.rawValue))
            #expect(family.kind == metric.kind)
            for sample in family.samples { #expect(sample.labels.map(\.name) == metric.labels, "\(metric.rawValue)") }
        }
        #expect(try PrometheusText.parse(PrometheusText.render(snapshot)) == snapshot)
    }

    static func transportStatus() -> MeshTransportStatus {
        var counters = MeshTransportCounters()
        counters.framesIn = 40
        counters.inboundDrops.add(.queueFull, 3)
        counters.outboundDrops.add(.linkDown, 2)
        var link = MeshLinkCounters()
        link.inboundDrops.add(.queueFull, 3)
        counters.links[MeshLinkID(7)] = link
        counters.reconnects = 1
        return MeshTransportStatus(isUp: false, detail: "0 of 1 hub connections up", linksUp: 0, counters: counters)
    }

    static func meshCounters() -> MeshCounters {
        var mesh = MeshCounters()
        mesh.ingress.add(.clockSkew)
        mesh.decode.add(MeshDecodeRejection(.fragment, .invalidValue(field: .fragmentTotal, value: 65_535)), 2)
        mesh.verification.add(.announceBadSignature)
        mesh.fragment.add(.evictedBytes)
        mesh.carrier.add(.uplinkNotDirected)
        mesh.dedup.add(MeshDedupEvent(.duplicate, .unverified), 5)
        mesh.relay.add(.refusedRejected)
        mesh.relayGate.add(.hidden, 3)
        mesh.peers.add(.added, 4000)
        mesh.peers.add(.lostEvicted, 1950)
        mesh.pins.add(.refused, 2)
        mesh.received.add(.announce, 4000)
        // Garbage types: one `unknown` series however many values (not a series per hex value).
        for raw: UInt8 in [0x7d, 0x7e, 0x7f] { mesh.received.add(MessageType(rawValue: raw), 2) }
        mesh.originated.add(.announce)
        mesh.transmit.add(.fragmented)
        return mesh
    }

    @Test("the mesh's typed counters and the transport's status become series under the catalogue's names and labels")
    func meshFamilies() {
        var metrics = BridgeMetrics()
        metrics.meshTransport = Self.transportStatus()
        metrics.mesh = Self.meshCounters()
        metrics.meshNode.droppedInputs = 6
        let s = metrics.snapshot()
        typealias L = MetricsSnapshot.Label
        #expect(s.value("bitchat_bridge_mesh_up") == 0)
        #expect(s.value("bitchat_bridge_mesh_frames_received_total") == 40)
        #expect(s.value("bitchat_bridge_mesh_transport_dropped_total", labels: [L("direction", "in"), L("reason", "queue_full")]) == 3)
        #expect(s.value("bitchat_bridge_mesh_transport_dropped_total", labels: [L("direction", "out"), L("reason", "link_down")]) == 2)
        #expect(s.value("bitchat_bridge_mesh_link_dropped_total", labels: [L("link", "link7"), L("direction", "in"), L("reason", "queue_full")]) == 3)
        #expect(s.value("bitchat_bridge_mesh_reconnects_total") == 1)
        #expect(s.value("bitchat_bridge_mesh_ingress_dropped_total", labels: [L("reason", "clock_skew")]) == 1)
        #expect(s.value("bitchat_bridge_mesh_decode_rejected_total", labels: [L("stage", "fragment"), L("reason", "invalidValue.fragmentTotal")]) == 2)
        #expect(s.value("bitchat_bridge_mesh_dedup_total", labels: [L("kind", "duplicate"), L("pool", "unverified")]) == 5)
        #expect(s.value("bitchat_bridge_mesh_relay_gate_total", labels: [L("outcome", "hidden")]) == 3)
        #expect(s.value("bitchat_bridge_mesh_peer_events_total", labels: [L("event", "lost_evicted")]) == 1950)
        #expect(s.value("bitchat_bridge_mesh_packets_received_total", labels: [L("type", "announce")]) == 4000)
        #expect(s.value("bitchat_bridge_mesh_packets_received_total", labels: [L("type", "unknown")]) == 6)
        #expect(s.family("bitchat_bridge_mesh_packets_received_total")?.samples.count == 2)
        #expect(s.value("bitchat_bridge_mesh_pins_total", labels: [L("event", "refused")]) == 2)
        #expect(s.value("bitchat_bridge_mesh_node_dropped_total", labels: [L("reason", "inputs")]) == 6)
        // The transport families are absent (declared, no samples) until the executable read a status.
        let none = BridgeMetrics().snapshot()
        #expect(none.family("bitchat_bridge_mesh_up")?.samples.isEmpty == true)
    }

    @Test("queue, store and mesh node drop labels are the typed keys' names, one series per key")
    func typedLabelKeys() {
        typealias L = MetricsSnapshot.Label
        var metrics = BridgeMetrics()
        for (index, queue) in BridgeMetrics.Queue.allCases.enumerated() {
            metrics.queueDepths[queue] = index + 1
            metrics.queueDrops[queue] = index + 10
        }
        for (index, store) in BridgeMetrics.Store.allCases.enumerated() { metrics.storeFailures[store] = index + 1 }
        metrics.meshNode.abandonedAtFlush = 4
        let s = metrics.snapshot()
        for (index, queue) in BridgeMetrics.Queue.allCases.enumerated() {
            #expect(s.value("bitchat_bridge_queue_depth", labels: [L("queue", queue.rawValue)]) == Double(index + 1))
            #expect(s.value("bitchat_bridge_queue_dropped_total", labels: [L("queue", queue.rawValue)]) == Double(index + 10))
        }
        #expect(s.family("bitchat_bridge_queue_dropped_total")?.samples.count == BridgeMetrics.Queue.allCases.count)
        #expect(BridgeMetrics.Queue.relayEvents.label == "relay_events" && BridgeMetrics.Queue.uplinkStore.label == "uplink_store")
        for (index, store) in BridgeMetrics.Store.allCases.enumerated() {
            #expect(s.value("bitchat_bridge_store_failures_total", labels: [L("store", store.rawValue)]) == Double(index + 1))
        }
        #expect(s.value("bitchat_bridge_mesh_node_dropped_total", labels: [L("reason", BridgeMetrics.MeshNodeDrop.flushTimeout.label)]) == 4)
        #expect(s.family("bitchat_bridge_mesh_node_dropped_total")?.samples.count == BridgeMetrics.MeshNodeDrop.allCases.count)
    }

    @Test("relay figures: events received summed over relays, drops by relay and reason, OK/CLOSED rejections apart")
    func relayFamilies() {
        var metrics = BridgeMetrics()
        var a = BridgeMetrics.RelayFigures()
        a.eventsReceived = 5
        a.drops = ["stale": 2]
        a.okRejected = ["pow": 1]
        a.closed = ["pow": 4]
        var b = BridgeMetrics.RelayFigures()
        b.eventsReceived = 3
        metrics.relays = ["ws://a": a, "ws://b": b]
        let s = metrics.snapshot()
        typealias L = MetricsSnapshot.Label
        #expect(s.value("bitchat_bridge_events_received_total") == 8)
        #expect(s.value("bitchat_bridge_relay_dropped_total", labels: [L("relay", "ws://a"), L("reason", "stale")]) == 2)
        #expect(s.value("bitchat_bridge_relay_rejections_total", labels: [L("relay", "ws://a"), L("message", "ok"), L("reason", "pow")]) == 1)
        #expect(s.value("bitchat_bridge_relay_rejections_total", labels: [L("relay", "ws://a"), L("message", "closed"), L("reason", "pow")]) == 4)
    }
}

/// contrib/'s Prometheus rules and Grafana dashboard name only catalogue metrics, with their own labels, and the
/// dashboard shows every family (issue 18). `promtool check rules`/`test rules` run in scripts/check-contrib.
@Suite("contrib/ dashboard and alert rules use the catalogue")
struct ContribMetricsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The PromQL expressions: each `expr:` of the rules (block scalars included), each `"expr"` of the dashboard.
    static func ruleExpressions() throws -> [String] {
        var out: [String] = []
        var block: [String]?
        var blockIndent = 0
        for line in try text("contrib/prometheus/bitchat-bridge.rules.yml").split(separator: "\n", omittingEmptySubsequences: false) {
            let indent = line.prefix { $0 == " " }.count
            if var current = block {
                if line.trimmingCharacters(in: .whitespaces).isEmpty || indent > blockIndent {
                    current.append(String(line))
                    block = current
                    continue
                }
                out.append(current.joined(separator: "\n"))
                block = nil
            }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("expr:") else { continue }
            let value = trimmed.dropFirst(5).trimmingCharacters(in: .whitespaces)
            if value == "|" || value == ">" { block = []; blockIndent = indent } else { out.append(value) }
        }
        if let block { out.append(block.joined(separator: "\n")) }
        return out
    }

    static func dashboard() throws -> JSONValue { try JSONParser().parse(try text("contrib/grafana/bitchat-bridge.json")) }

    static func dashboardExpressions() throws -> [String] {
        try (dashboard()["panels"]?.arrayValue ?? []).flatMap { panel in
            (panel["targets"]?.arrayValue ?? []).compactMap { $0["expr"]?.stringValue }
        }
    }

    /// `(metric, labels in its selector {…})` for every `bitchat_bridge_…` and `process_…` name in an expression.
    static func uses(_ expression: String) -> [(name: String, labels: [String])] {
        let chars = Array(expression)
        var out: [(String, [String])] = []
        var i = 0
        func isName(_ c: Character) -> Bool { c.isLetter || c.isNumber || c == "_" }
        while i < chars.count {
            guard isName(chars[i]), i == 0 || !isName(chars[i - 1]) else { i += 1; continue }
            var j = i
            while j < chars.count, isName(chars[j]) { j += 1 }
            let word = String(chars[i..<j])
            if word.hasPrefix("bitchat_bridge_") || word.hasPrefix("process_") {
                var labels: [String] = []
                if j < chars.count, chars[j] == "{", let close = chars[j...].firstIndex(of: "}") {
                    for matcher in String(chars[(j + 1)..<close]).split(separator: ",") {
                        let name = matcher.prefix { isName($0) }
                        if !name.isEmpty { labels.append(String(name)) }
                    }
                }
                out.append((word, labels))
            }
            i = j
        }
        return out
    }

    /// Labels every series has from the scrape, beside the family's own.
    static let targetLabels: Set<String> = ["instance", "job"]

    @Test func everyMetricTheRulesAndDashboardUseIsInTheCatalogue() throws {
        let catalogue = Dictionary(uniqueKeysWithValues: BridgeMetric.allCases.map { ($0.rawValue, Set($0.labels)) })
        let rules = try Self.ruleExpressions()
        let panels = try Self.dashboardExpressions()
        #expect(rules.count == 9 && panels.count >= 25, "rules \(rules.count), dashboard targets \(panels.count)")
        for expression in rules + panels {
            let uses = Self.uses(expression)
            #expect(!uses.isEmpty, "no bridge metric in \(expression)")
            for use in uses {
                let known = catalogue[use.name]
                #expect(known != nil, "\(use.name) (in \(expression)) is not in BridgeMetric")
                for label in use.labels where !Self.targetLabels.contains(label) {
                    #expect(known?.contains(label) == true, "\(use.name) has no label \(label) (in \(expression))")
                }
            }
        }
        // `by (…)` groups only by labels some metric of the expression carries (a typo groups everything into one).
        for expression in rules + panels {
            let names = Set(Self.uses(expression).map(\.name))
            let carried = names.reduce(into: Self.targetLabels) { $0.formUnion(catalogue[$1] ?? []) }
            var rest = Substring(expression)
            while let by = rest.range(of: "by (") {
                let inside = rest[by.upperBound...].prefix { $0 != ")" }
                for label in inside.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                    #expect(carried.contains(label), "grouping by \(label) in \(expression)")
                }
                rest = rest[by.upperBound...]
            }
        }
        let shown = Set((rules + panels).flatMap { Self.uses($0).map(\.name) })
        let dashboardShown = Set(panels.flatMap { Self.uses($0).map(\.name) })
        #expect(dashboardShown == Set(catalogue.keys), "families without a panel: \(Set(catalogue.keys).subtracting(dashboardShown).sorted())")
        #expect(shown.isSuperset(of: ["bitchat_bridge_relay_up", "bitchat_bridge_mesh_peers", "bitchat_bridge_hidden_total", "bitchat_bridge_queue_dropped_total"]))
    }

    @Test func theExtractorSeesNamesAndSelectorLabels() {
        let uses = Self.uses(#"sum by (queue) (rate(bitchat_bridge_queue_dropped_total{instance=~"$i",queue!="x"}[5m])) / bitchat_bridge_uptime_seconds"#)
        #expect(uses.map(\.name) == ["bitchat_bridge_queue_dropped_total", "bitchat_bridge_uptime_seconds"])
        #expect(uses.first?.labels == ["instance", "queue"])
        #expect(Self.uses("xbridge_foo + up").isEmpty)
    }
}
