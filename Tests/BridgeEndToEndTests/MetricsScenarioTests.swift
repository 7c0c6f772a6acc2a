import BitchatWire
import BotCrypto
import BotSupport
import BridgeTestSupport
import BridgeTesting
import Foundation
import Nostr
import Testing

/// One HTTP GET to the bridge's loopback listener: (status, body); 503 bodies are read too.
func httpGet(port: Int, path: String) async throws -> (status: Int, body: String) {
    let script = """
        import sys, urllib.request, urllib.error
        try:
            r = urllib.request.urlopen(sys.argv[1], timeout=5); print(r.status); sys.stdout.write(r.read().decode())
        except urllib.error.HTTPError as e:
            print(e.code); sys.stdout.write(e.read().decode())
        """
    let child = try ChildProcess("/usr/bin/python3", ["-c", script, "http://127.0.0.1:\(port)\(path)"], name: "http-get")
    guard try await child.waitForExit(timeout: .seconds(10)) == 0, let first = child.stdoutLines.first, let status = Int(first) else {
        return (0, child.transcript)
    }
    return (status, child.stdoutLines.dropFirst().joined(separator: "\n"))
}

/// Polls `/healthz` until its status is `expected` or `timeout` passes; returns the last (status, body) and
/// when it matched.
func waitForHealth(port: Int, _ expected: Int, timeout: Duration) async throws -> (status: Int, body: String, after: Duration) {
    let started = ContinuousClock.now
    var last: (status: Int, body: String) = (0, "")
    while ContinuousClock.now - started < timeout {
        last = try await httpGet(port: port, path: "/healthz")
        if last.status == expected { break }
        try await Task.sleep(for: .milliseconds(100))
    }
    return (last.status, last.body, ContinuousClock.now - started)
}

/// Prometheus text → `name{labels}` → value (sample lines only).
func parseSamples(_ text: String) -> [String: Double] {
    var samples: [String: Double] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
        samples[String(line[..<space])] = value
    }
    return samples
}

/// The sum of every series of `family` whose labels contain each of `matching` (e.g. `reason="stale"`).
func total(_ samples: [String: Double], _ family: String, _ matching: String...) -> Double {
    total(samples, family, matching: matching)
}

func total(_ samples: [String: Double], _ family: String, matching: [String]) -> Double {
    samples.filter { key, _ in
        (key == family || key.hasPrefix(family + "{")) && matching.allSatisfy { key.contains($0) }
    }.values.reduce(0, +)
}

/// The metric families of the metric table in docs/operations.md (the same rows `MetricsCatalogueTests` checks against the catalogue).
func readmeFamilies() throws -> [String] {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let text = try String(contentsOf: root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
    guard let start = text.range(of: "<!-- metrics-table"), let end = text.range(of: "<!-- /metrics-table -->") else { return [] }
    return text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line in
        let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let name = cells.first, name.hasPrefix("`bitchat_bridge_") || name.hasPrefix("`process_") else { return nil }
        return name.trimmingCharacters(in: CharacterSet(charactersIn: "`"))
    }
}

/// A hostile radio peer: a raw TCP connection to a radio hub writing length-prefixed frames (the virtual
/// radio's framing, `VirtualRadio/RadioFraming`: u16 big-endian length, then the frame).
final class RawHubClient: @unchecked Sendable {
    private let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        struct ConnectFailed: Error {}
        guard result == 0 else {
            close(fd)
            throw ConnectFailed()
        }
    }

    deinit { close(fd) }

    func send(_ frames: [[UInt8]]) {
        var bytes: [UInt8] = []
        for frame in frames { bytes += [UInt8(frame.count >> 8), UInt8(frame.count & 0xff)] + frame }
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            offset += n
        }
    }
}

/// A channel message from a fresh key as an Android phone with proof of work off sends it (NOSTR-GEO §5.2:
/// kind 20000, `g` and `n` tags, no `nonce`), with `createdAt` chosen by the caller.
func channelEvent(_ content: String, createdAt: Int64) throws -> NostrEvent {
    let key = try SchnorrSecretKey(bytes: SecureRandom.bytes(32))
    return try UnsignedEvent(
        pubkey: key.publicKey, createdAt: createdAt, kind: NostrKind.ephemeralChat,
        tags: [["g", "u4pruy"], ["n", "anon"]], content: content
    ).signed(with: key)
}

extension World {
    /// A radio hub on a given port (a killed island's hub started again where the bridge looks for it).
    func startHub(port: Int) async throws -> ChildProcess {
        let hub = try spawn(["radio-hub", "--listen", "127.0.0.1:\(port)", "--mtu", "512"], name: "hub-\(port)")
        try await hub.waitForLine("hub listening") { $0.contains("\"listening\"") }
        return hub
    }

    /// A Python script of the venv (the reference peers), started and stopped with the world.
    func spawnPython(_ arguments: [String], name: String) throws -> ChildProcess {
        let process = try ChildProcess(TestEnvironment.venvBinary("python"), arguments, name: name)
        processes.append(process)
        return process
    }

    /// Publishes signed events to the relay over one WebSocket (Python `websockets`), waiting for each OK;
    /// returns how many the relay accepted.
    func publishRaw(_ events: [NostrEvent]) async throws -> Int {
        let script = """
            import asyncio, json, sys, websockets
            async def main():
                events = [json.loads(l) for l in sys.stdin if l.strip()]
                accepted = 0
                async with websockets.connect(sys.argv[1], max_size=None) as ws:
                    for e in events:
                        await ws.send(json.dumps(["EVENT", e]))
                    pending = {e["id"] for e in events}
                    while pending:
                        msg = json.loads(await asyncio.wait_for(ws.recv(), 20))
                        if msg[0] == "OK" and msg[1] in pending:
                            pending.discard(msg[1])
                            accepted += 1 if msg[2] else 0
                print(json.dumps({"accepted": accepted}), flush=True)
            asyncio.run(main())
            """
        let publisher = try ChildProcess(TestEnvironment.venvBinary("python"), ["-c", script, relayURL], name: "raw-publisher")
        processes.append(publisher)
        publisher.write(events.map(\.json).joined(separator: "\n") + "\n")
        publisher.closeStdin()
        let line = try await publisher.waitForLine(timeout: .seconds(40), "the relay's OKs") { $0.contains("\"accepted\"") }
        return Int(try JSONParser().parse(line)["accepted"]?.integerValue ?? 0)
    }
}

/// Issue 15's metrics scenario and issue 14's health and drop items, on real processes: the local relay, a
/// relay that upgrades and then stays silent, a radio hub, the bridge binary, scripted phones (`mesh listen`, `mesh deposit`, `nostr post`), a Nostr
/// flood from fresh keys, events outside the ±900 s window, an announce flood of fresh mesh identities, a
/// relay kill and a hub kill. `/metrics` must list every family of the README and move every counter the
/// scenario touches; `/healthz` must follow the relay and the hub down and up (the hub within 5 s).
@Suite("Metrics and health scenario end to end", TestEnvironment.needsVenv, .serialized)
struct MetricsScenarioTests {
    /// N from "<relay>: backoff (…), next attempt in N s" in a /healthz body.
    static func nextAttemptSeconds(_ body: String, relay: String) -> Int? {
        guard let start = body.range(of: "\(relay): ") else { return nil }
        let rest = body[start.upperBound...].prefix { $0 != ";" && $0 != "\"" }
        guard let phrase = rest.range(of: "next attempt in ") else { return nil }
        return Int(rest[phrase.upperBound...].prefix { $0.isNumber })
    }

    /// Flood sizes: the Nostr flood is well past the gateway's downlink queue (30 pending, 30 a minute), so
    /// the queue fills and drops; the announce flood is past the first-contact pool (1,024), so the peer
    /// table evicts — and every eviction must leave `bitchat_bridge_mesh_peers`.
    static let nostrFlood = 100
    static let announceFlood = 1_750
    /// Well below the link's inbound budget (512 frames), so a loaded bridge drops few (each drop counted).
    static let announceBatch = 250

    /// README families this scenario does not give a sample line, and why (a labelled counter has a series only
    /// once one of its labels has counted). Every other family must have one.
    static let unsampled: [String: String] = [
        "bitchat_bridge_relay_rejections_total": "the local relay accepts every bridge publication (no OK false, no CLOSED)",
        "bitchat_bridge_courier_deposits_total": "no private mail here: CourierWorldTests scrapes the courier counters after deposits, drops and deliveries",
        "bitchat_bridge_courier_drops_total": "as bitchat_bridge_courier_deposits_total",
        "bitchat_bridge_courier_publishes_total": "as bitchat_bridge_courier_deposits_total",
        "bitchat_bridge_courier_deliveries_total": "as bitchat_bridge_courier_deposits_total",
        "bitchat_bridge_courier_removed_total": "no mail expires or overflows a quota here; CourierGatewayTests counts both",
        "bitchat_bridge_courier_airtime_waits_total": "no private mail here: CourierWorldTests scrapes it after chat spent the downlink budget",
        "bitchat_bridge_relay_clock_offset_seconds": "neither relay here (nostr-sdk's, the silent one) sends a Date header; RelayClockTests (world) and DoctorCommandTests read it from LoopbackRelay's",
        "bitchat_bridge_relay_connect_failures_total": "only when a reconnect attempt falls inside the killed relay's ~2 s outage (timing)",
        "bitchat_bridge_deposits_dropped_total": "the one deposit is well-formed and within its budget",
        "bitchat_bridge_carriers_dropped_total": "no carrier the bridge's roles refuse is sent",
        "bitchat_bridge_mesh_transport_dropped_total": "the announce flood is paced below the link's inbound budget so none drop",
        "bitchat_bridge_mesh_link_dropped_total": "as bitchat_bridge_mesh_transport_dropped_total, per link",
        "bitchat_bridge_mesh_pins_total": "flood identities arrive relayed (TTL 1), which never pins; PinTests covers pins",
        "bitchat_bridge_mesh_ingress_dropped_total": "every frame's timestamp is current and its TTL in range",
        "bitchat_bridge_mesh_fragments_total": "no message here is large enough to fragment",
        "bitchat_bridge_mesh_carriers_rejected_total": "no malformed Nostr carrier is sent on the mesh",
        "bitchat_bridge_mesh_transmit_total": "its events (fragmented, deferred) need large or throttled sends, none here",
        "bitchat_bridge_sync_replies_total": "the scripted phones send no REQUEST_SYNC the bridge answers with packets",
        "bitchat_bridge_board_packets_total": "no board post is made in this scenario",
        "bitchat_bridge_fleet_lists_total": "fleet moderation is off (no operator_keys)",
        "bitchat_bridge_site_records_total": "no operator key in the data directory (SiteEndToEndTests scrapes them)",
        "bitchat_bridge_site_records": "no operator key in the data directory (SiteEndToEndTests scrapes them)",
        "bitchat_bridge_site_records_unacknowledged": "no operator key in the data directory (SiteEndToEndTests scrapes them)",
        "bitchat_bridge_site_stages": "no operator key in the data directory (SiteEndToEndTests scrapes them)",
        "bitchat_bridge_board_nostr_total": "no board post is made, so none is copied to Nostr",
    ]

    @Test(.timeLimit(.minutes(3)))
    func scenarioMovesEveryCounterAndHealthFollowsTheRelayAndTheHub() async throws {
        let started = ContinuousClock.now
        let world = World()
        let http = LoopbackPort.free()
        // The sdk relay allows 60 events a minute per connection by default; the flood needs more.
        let relayArguments = ["--notes-per-minute", "10000"]
        try await world.startRelay(arguments: relayArguments)
        // Beside it a relay that completes the upgrade and then says nothing (issue 14): connected, never up.
        let silentPort = LoopbackPort.free()
        let silentRelay = try world.spawnPython(
            [Peers.fixtures + "/hostile_relay.py", "--port", "\(silentPort)", "--mode", "silent"], name: "silent-relay")
        _ = try await silentRelay.waitForLine("silent relay ready") { $0.hasPrefix("READY ") }
        let silent = "ws://127.0.0.1:\(silentPort)"
        let relay = world.relayURL
        let island = try await world.startIsland()
        let bridge = try await world.startBridge("bridge", island: island, extra: [
            "BRIDGE_HTTP_LISTEN": "127.0.0.1:\(http)", "BRIDGE_RELAYS": "\(relay),\(silent)",
        ])
        let reader = try await world.startReader("reader", island: island)
        try await world.waitForBridges(reader, count: 1)
        _ = try await scrapeMetrics(port: http) {
            $0.contains("bitchat_bridge_relay_answering{relay=\"\(relay)\"} 1") && $0.contains("bitchat_bridge_relay_up{relay=\"\(silent)\"} 1")
                && $0.contains("bitchat_bridge_relay_answering{relay=\"\(silent)\"} 0")
        }
        let healthy = try await waitForHealth(port: http, 200, timeout: .seconds(10))
        #expect(healthy.status == 200 && healthy.body.contains("1 of 2 answering"), "\(healthy.body)")
        #expect(healthy.body.contains("\(silent): open, no answer yet"), "the silent relay is named: \(healthy.body)")

        // Traffic both ways: a phone's channel post reaches the mesh, a mesh-only phone's deposit the relay.
        let post = try await world.post("hello from the internet")
        _ = try await reader.waitForLine("the post on the mesh") { $0.contains(post) }
        _ = try await world.deposit(island: island, text: "hello from the mesh")

        // A Nostr flood from fresh keys, distinct texts (the spam filter has no reason to hide them), plus
        // one event 30 minutes old and one 30 minutes ahead: the pool drops those two at intake.
        let now = Int64(Date().timeIntervalSince1970)
        var flood = [try channelEvent("an old note", createdAt: now - 1_800), try channelEvent("a note from the future", createdAt: now + 1_800)]
        // And one key posting ten near-copies at once: the spam filter's message rate (a bucket of 6) hides
        // the tail, and each hide is a moderation-log record.
        let spammer = try SchnorrSecretKey(bytes: SecureRandom.bytes(32))
        flood += try (1...10).map { i in
            try UnsignedEvent(
                pubkey: spammer.publicKey, createdAt: now, kind: NostrKind.ephemeralChat,
                tags: [["g", "u4pruy"], ["n", "spammer"]], content: "BUY CHEAP TICKETS NOW \(i)"
            ).signed(with: spammer)
        }
        flood += try (0..<Self.nostrFlood).map { _ in try channelEvent("note \(Hex.encode(SecureRandom.bytes(12)))", createdAt: now) }
        let accepted = try await world.publishRaw(flood)
        #expect(accepted >= Self.nostrFlood + 11, "the relay accepted \(accepted) of \(flood.count)")

        // An announce flood on the island, paced in batches below the link's inbound budget (512 frames)
        // by what the bridge has taken in.
        let flooder = try RawHubClient(port: island)
        var sent = 0
        while sent < Self.announceFlood {
            let time = UInt64(Date().timeIntervalSince1970 * 1000)
            flooder.send(try (sent..<(sent + Self.announceBatch)).map { try Segment.floodAnnounce($0, at: time) })
            sent += Self.announceBatch
            let target = Double(sent) * 0.9
            _ = try await scrapeMetrics(port: http, timeout: .seconds(30)) { text in
                let s = parseSamples(text)
                return total(s, "bitchat_bridge_mesh_packets_received_total", "type=\"announce\"")
                    + total(s, "bitchat_bridge_mesh_transport_dropped_total", "direction=\"in\"") >= target
            }
        }
        // Three hostile frames: bytes that are no packet, an announce whose signature was altered, and one valid
        // announce sent twice (the second a duplicate).
        let time = UInt64(Date().timeIntervalSince1970 * 1000)
        var forged = try Segment.floodAnnounce(Self.announceFlood, at: time)
        forged[forged.count - 1] ^= 0x01
        let twice = try Segment.floodAnnounce(Self.announceFlood + 1, at: time)
        flooder.send([[0xFF, 0x00, 0x01, 0x02], forged, twice, twice])
        // After the flood the gauge is the table's count: every identity added and not lost, no leak.
        let settled = try await scrapeMetrics(port: http, timeout: .seconds(30)) { text in
            let s = parseSamples(text)
            let inTable = total(s, "bitchat_bridge_mesh_peer_events_total", "event=\"added\"") - total(s, "bitchat_bridge_mesh_peer_events_total", "event=\"lost_")
            return total(s, "bitchat_bridge_mesh_peer_events_total", "event=\"lost_evicted\"") > 0 && total(s, "bitchat_bridge_mesh_peers") == inTable
        }
        let afterFlood = parseSamples(settled)
        print("setup, traffic and floods: \(ContinuousClock.now - started)")
        let peers = total(afterFlood, "bitchat_bridge_mesh_peers")
        #expect(peers <= 2_048, "bitchat_bridge_mesh_peers \(peers) within the peer table's 2,048")

        // The relay killed: the relay check fails (with the relay's reason), and recovers once it is back.
        world.relay?.stop(signal: SIGKILL)
        let relayDown = try await waitForHealth(port: http, 503, timeout: .seconds(15))
        #expect(relayDown.status == 503 && relayDown.body.contains("relays: 0 of 2 answering"), "\(relayDown.body)")
        #expect(relayDown.body.contains(relay), "the failing relay is named: \(relayDown.body)")
        try await world.startRelay(arguments: relayArguments)
        // The bridge backs off exponentially while the relay is away (1, 2, 4, 8, 16 s … ×0.8–1.2), so how soon
        // it is back depends on how long the relay took to restart. /healthz names the next attempt; the bridge
        // must be answering within 10 s of it.
        let whileAway = try await httpGet(port: http, path: "/healthz")
        let nextAttempt = Self.nextAttemptSeconds(whileAway.body, relay: relay)
        #expect(whileAway.status == 200 || nextAttempt != nil || whileAway.body.contains("\(relay): connecting"),
            "a relay that is away says when it is tried next: \(whileAway.body)")
        let relayBack = try await waitForHealth(port: http, 200, timeout: .seconds(10 + (nextAttempt ?? 0)))
        #expect(relayBack.status == 200, "\(relayBack.body)")
        print("relay killed: /healthz 503 after \(relayDown.after), 200 \(relayBack.after) after the restart (next attempt was in \(nextAttempt.map { "\($0) s" } ?? "-"))")

        // The hub killed: /healthz 503 within 5 s (the issue's bound), naming the mesh; 200 when it returns.
        let hub = try #require(world.processes.first { $0.name == "hub-\(island)" })
        hub.stop(signal: SIGKILL)
        let meshDown = try await waitForHealth(port: http, 503, timeout: .seconds(5))
        #expect(meshDown.status == 503 && meshDown.body.contains("mesh: down"), "\(meshDown.body)")
        print("hub killed: /healthz 503 after \(meshDown.after)")
        _ = try await world.startHub(port: island)
        let meshBack = try await waitForHealth(port: http, 200, timeout: .seconds(20))
        #expect(meshBack.status == 200, "\(meshBack.body)")
        print("hub restarted: /healthz 200 after \(meshBack.after)")
        #expect(bridge.isRunning)

        // Every family of the README is on /metrics, and every counter the scenario must move has moved.
        let text = try await scrapeMetrics(port: http) { text in
            let s = parseSamples(text)
            return total(s, "bitchat_bridge_mesh_up") == 1 && total(s, "bitchat_bridge_mesh_reconnects_total") >= 1
                && total(s, "bitchat_bridge_relay_reconnects_total") >= 1
        }
        // Declared is not enough (HELP and TYPE are printed for every family): each family of the README has a
        // sample line after this traffic, but for the ones listed in ``unsampled``, each with why.
        let s = parseSamples(text)
        let families = try readmeFamilies()
        #expect(families.count >= 50, "the README's metrics table was read")
        var missing: [String] = []
        for family in families {
            #expect(text.contains("# TYPE \(family) "), "\(family) missing from /metrics")
            let sampled = s.keys.contains { $0 == family || $0.hasPrefix(family + "{") }
            if !sampled && Self.unsampled[family] == nil { missing.append(family) }
        }
        #expect(missing.isEmpty, "families with no sample line after the scenario: \(missing)")
        #expect(Set(Self.unsampled.keys).isSubset(of: Set(families)), "every exception names a README family")
        let moved: [(String, [String], Double)] = [
            ("bitchat_bridge_relay_frames_received_total", [], 1),
            ("bitchat_bridge_relay_events_delivered_total", [], 1),
            ("bitchat_bridge_relay_dropped_total", ["reason=\"stale\""], 1),
            ("bitchat_bridge_relay_dropped_total", ["reason=\"future\""], 1),
            ("bitchat_bridge_relay_connections_lost_total", [], 1),
            ("bitchat_bridge_relay_reconnects_total", [], 1),
            ("bitchat_bridge_events_received_total", [], Double(Self.nostrFlood)),
            ("bitchat_bridge_events_verified_total", [], Double(Self.nostrFlood)),
            ("bitchat_bridge_forwarded_total", ["direction=\"nostr-to-mesh\""], 1),
            ("bitchat_bridge_forwarded_total", ["direction=\"mesh-to-nostr\""], 1),
            ("bitchat_bridge_deposits_total", [], 1),
            ("bitchat_bridge_hidden_total", ["direction=\"nostr-to-mesh\""], 1),
            ("bitchat_bridge_moderation_log_records", [], 1),
            ("bitchat_bridge_queue_dropped_total", ["queue=\"downlink\""], 1),
            ("bitchat_bridge_mesh_frames_received_total", [], 1_024),
            ("bitchat_bridge_mesh_packets_received_total", ["type=\"announce\""], 1_024),
            ("bitchat_bridge_mesh_peer_events_total", ["event=\"added\""], 1_024),
            ("bitchat_bridge_mesh_peer_events_total", ["event=\"lost_evicted\""], 1),
            ("bitchat_bridge_mesh_reconnects_total", [], 1),
            ("bitchat_bridge_mesh_decode_rejected_total", [], 1),
            ("bitchat_bridge_mesh_verification_failed_total", [], 1),
            ("bitchat_bridge_mesh_dedup_total", [], 1),
            ("bitchat_bridge_uptime_seconds", [], 1),
            ("bitchat_bridge_build_info", [], 1),
            ("bitchat_bridge_health", ["component=\"mesh\""], 1),
            ("process_cpu_seconds_total", [], 0.01),
            ("process_resident_memory_bytes", [], 1_000_000),
            ("process_start_time_seconds", [], 1_700_000_000),
            ("process_open_fds", [], 5),
            ("process_max_fds", [], 64),
        ]
        for (family, labels, atLeast) in moved {
            let value = total(s, family, matching: labels)
            #expect(value >= atLeast, "\(family)\(labels) = \(value), expected ≥ \(atLeast)")
        }
        let relayDrops = s.filter { $0.key.hasPrefix("bitchat_bridge_relay_dropped_total{") }
        let meshDrops = s.filter { $0.key.contains("_dropped_total{") && $0.key.hasPrefix("bitchat_bridge_mesh_") }
        print("metrics scenario: \(ContinuousClock.now - started) in all; relay drops \(relayDrops); mesh drops \(meshDrops); "
            + "downlink queue drops \(total(s, "bitchat_bridge_queue_dropped_total", "queue=\"downlink\"")), "
            + "hidden \(total(s, "bitchat_bridge_hidden_total")), bitchat_bridge_mesh_peers \(peers) after \(Self.announceFlood) flood identities")
    }
}
