import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// Issue 14's mesh "Done when" on `bitchat-bridge run` itself (the engine and `mesh listen` have their own
/// proofs in `RadioHostileTests` and `PeerTableTests`): after a 20,000-identity announce flood, established
/// phones' messages and deposits still cross (≥ 11 of 12) and `bridge_mesh_peers` returns to the real count.
@Suite("Mesh announce flood end to end (real relay, virtual radio, real processes)", TestEnvironment.needsVenv, .serialized)
struct MeshFloodEndToEndTests {
    static let phones = 12
    static let flood = 20_000
    /// Flood frames per write; the writes follow each other with no pacing (TCP backpressure from the hub only).
    static let floodBatch = 1_000
    /// Seconds a silent peer stays in the bridge's live table here (default 180): the flood's identities
    /// expire within the test, while the phones and the reader (announcing every 3 s) never go silent that long (but for a frame lost in the flood).
    static let peerTimeout = 6
    /// What the phones say and deposit: unlike one another, so the spam filter's cross-user copy rule (which
    /// hid 9 of 12 "hello from phone N") has no reason to hide any.
    static let lines = [
        "the main stage opens at eight", "anyone seen a blue backpack near the gate", "water refill by the north bar is free",
        "lost my friend Anna, tall, red jacket", "the silent disco starts after midnight", "shuttle to town leaves every half hour",
        "first aid tent moved behind the food court", "great set from the drummers just now", "campsite C has no showers left",
        "who wants to share a taxi on Sunday", "found keys with a yellow tag at info", "sunset over the lake was amazing",
        "queue at the token booth is huge right now", "band on the forest stage cancelled tonight", "need a phone charger, will pay",
        "the vegan stall sells out by nine", "meet at the ferris wheel at ten", "rain expected around four, bring ponchos",
        "left a green tent open by mistake, sorry", "kids area closes at seven today", "the bridge by the river is muddy",
        "fireworks start right after the headliner", "selling one spare wristband at face value", "thanks to the crew cleaning the field",
        "lost wallet near stage two, brown leather", "coffee cart opens at seven tomorrow", "bike parking is full at the east gate",
        "cold beer at the south bar, short queue", "mind the cables behind the sound desk", "yoga on the hill at nine in the morning",
        "shade tent has free sunscreen", "drone show cancelled because of wind", "someone is playing guitar by campfire six",
        "the last bus back leaves at one", "late night food truck by camp B", "good night everyone, see you tomorrow",
    ]

    @Test(
        "after a 20,000-identity announce flood on island A, established phones' messages and deposits cross (≥ 11 of 12), bridge_mesh_peers returns to the real count, drops and evictions are on /metrics by reason",
        .timeLimit(.minutes(3)))
    func establishedPhonesCrossAfterAnAnnounceFlood() async throws {
        let started = ContinuousClock.now
        let world = World()
        try await world.startRelay()
        let islandA = try await world.startIsland()
        let islandB = try await world.startIsland()
                let http = LoopbackPort.free()
        _ = try await world.startBridge("bridge", island: islandA, extra: [
            "BRIDGE_MESH": "tcp://127.0.0.1:\(islandA),tcp://127.0.0.1:\(islandB)", "BRIDGE_HTTP_LISTEN": "127.0.0.1:\(http)",
            "BRIDGE_MESH_PEER_TIMEOUT": "\(Self.peerTimeout)",
        ])
        // The reader on island B announces every 3 s so that it stays in the bridge's table (6 s timeout).
        let reader = try world.spawn(
            ["mesh", "listen", "--mesh", "tcp://127.0.0.1:\(islandB)", "--ephemeral", "--nickname", "reader", "--announce-interval", "3"],
            name: "reader")
        _ = try await reader.waitForLine("reader ready") { $0.contains("\"ready\"") }
        try await world.waitForBridges(reader, count: 1)

        // 12 phones on island A, each a running `mesh listen` with its identity kept in `phone-<i>`, announcing
        // every 3 s. Once the reader knows them all (the bridge verified and relayed their announces), each says
        // one line: a verified message is traffic evidence, which establishes a peer in the bridge's table at
        // once (`PeerTable`, `Evidence.traffic`) — the reader seeing the line proves the bridge verified and
        // relayed it. (A line sent before the bridge knows its sender is not relayed: why the phones do not say
        // it at start.)
        var phones: [ChildProcess] = []
        for i in 0..<Self.phones {
            let phone = try world.spawn(
                ["mesh", "listen", "--mesh", "tcp://127.0.0.1:\(islandA)", "--data-dir", "\(world.directory)/phone-\(i)",
                 "--nickname", "phone\(i)", "--announce-interval", "3"],
                name: "phone\(i)")
            phones.append(phone)
        }
        for i in 0..<Self.phones {
            _ = try await reader.waitForLine("phone\(i) known on island B") { $0.contains("\"peer\"") && $0.contains("\"nickname\":\"phone\(i)\"") }
        }
        let hellos = try await say(world, island: islandA) { Self.lines[$0] }
        #expect(hellos.count == Self.phones)
        _ = try await reader.waitForLines(count: Self.phones, timeout: .seconds(30), "the phones' first lines on island B") {
            line in line.contains("\"message\"") && hellos.contains { line.contains($0) }
        }
        let before = parseSamples(try await scrapeMetrics(port: http) { total(parseSamples($0), "bridge_mesh_peers") >= Double(Self.phones + 1) })
        print("established: \(Self.phones) phones, bridge_mesh_peers \(total(before, "bridge_mesh_peers")) after \(ContinuousClock.now - started)")

        // The flood: 20,000 fresh, validly signed identities on island A, written as fast as the hub takes them.
        let flooder = try RawHubClient(port: islandA)
        let floodStarted = ContinuousClock.now
        var sent = 0
        while sent < Self.flood {
            let time = UInt64(Date().timeIntervalSince1970 * 1000)
            flooder.send(try (sent..<(sent + Self.floodBatch)).map { try floodAnnounce($0, at: time) })
            sent += Self.floodBatch
        }
        let floodTime = ContinuousClock.now - floodStarted
        // Every flood frame is accounted for: taken in as an announce, or dropped with a reason (transport or
        // ingress gate). Waiting for that is also the barrier after which the phones speak.
        let flooded = parseSamples(try await scrapeMetrics(port: http, timeout: .seconds(60)) { text in
            let s = parseSamples(text)
            return Self.announcesAccounted(s) - Self.announcesAccounted(before) >= Double(Self.flood) * 0.99
        })
        // The counters above run ahead of the bridge's engine (the transport counts a frame when it queues it):
        // wait until the engine has drained the flood — packets processed unchanged between two scrapes. Phones
        // that spoke while the bridge still worked through the backlog shared island A's inbound queue with the
        // flood (one link, one budget): in one run 0 of 12 of their lines got through then. "After the flood"
        // here means after the bridge has taken it in.
        var lastProcessed = -1.0
        _ = try await scrapeMetrics(port: http, timeout: .seconds(60)) { text in
            let processed = total(parseSamples(text), "bridge_mesh_packets_received_total")
            defer { lastProcessed = processed }
            return processed == lastProcessed
        }
        print("flood: \(Self.flood) announces written in \(floodTime), accounted for after \(ContinuousClock.now - floodStarted)")

        // Deposits (toBridge) are published under the rendezvous tags, not on the channel: a subscriber to everything.
        let subscriber = try await world.startRawSubscriber()
        // Each established phone says one line and deposits one event (same identity, `phone-<i>`), each kind
        // started together as a burst of phones would (a deposit waits up to 30 s for the bridge's announce: 24
        // processes starting at once on a loaded 2-core machine took more than the default 10 s).
        let said = try await say(world, island: islandA) { Self.lines[Self.phones + $0] }
        let depositors = try (0..<Self.phones).map { i in
            try world.spawn(
                ["mesh", "deposit", "--mesh", "tcp://127.0.0.1:\(islandA)", "--data-dir", "\(world.directory)/phone-\(i)",
                 "--nickname", "phone\(i)", "--cell", "u4pruy", "--wait", "30", Self.lines[2 * Self.phones + i]],
                name: "deposit\(i)")
        }
        var deposited: [String] = []
        for depositor in depositors {
            guard let line = try? await depositor.waitForLine(timeout: .seconds(30), "\(depositor.name) deposited", where: { $0.contains("\"deposited\"") }),
                  let id = try? JSONParser().parse(line)["eventID"]?.stringValue else { continue }
            deposited.append(id)
        }
        #expect(said.count == Self.phones && deposited.count == Self.phones, """
            the phones sent \(said.count) lines and \(deposited.count) deposits; \
            \(depositors.filter { !$0.stdoutLines.contains { $0.contains("\"deposited\"") } }.map(\.transcript))
            """)

        // Bounded wait for all 12 of each; the issue's bound is 11 of 12.
        func relayed() -> Int { Set(meshMessages(reader)).intersection(said).count }
        func published() -> Int { deposited.filter { id in subscriber.stdoutLines.contains { $0.hasPrefix("[\"EVENT\"") && $0.contains(id) } }.count }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, relayed() < said.count || published() < deposited.count {
            try await Task.sleep(for: .milliseconds(100))
        }
        let gate = parseSamples(try await httpGet(port: http, path: "/metrics").body).filter {
            $0.key.contains("relay_gate") || $0.key.contains("hidden") || $0.key.contains("type=\"message\"") || $0.key.contains("verification_failed")
                || $0.key.contains("pins_total")
        }
        #expect(relayed() >= 11, "\(relayed()) of 12 messages of established phones relayed to island B after the flood; \(gate)")
        #expect(published() >= 11, "\(published()) of 12 deposits of established phones published on the relay after the flood")
        print("after the flood: \(relayed()) of 12 messages relayed, \(published()) of 12 deposits published")

        // The real count once the flood's identities have timed out: the 12 phones (still running, announcing
        // every 3 s; their `mesh say`/`mesh deposit` processes used the same identities) and the reader on
        // island B — 13. The bridge does not count itself. Tolerance +1: one stray identity (e.g. a flood
        // identity re-announced by a phone's relay just before the scrape) may still be inside its 6 s; and −1: one
        // phone whose announce was lost on the radio can miss one window. The gauge must come down from
        // thousands to that, and the table's books must balance (added − lost = peers: no leak).
        let real = Double(Self.phones + 1)
        let settled = parseSamples(try await scrapeMetrics(port: http, timeout: .seconds(40)) { text in
            let s = parseSamples(text)
            return total(s, "bridge_mesh_peers") <= real + 1
        })
        let peers = total(settled, "bridge_mesh_peers")
        let peakPeers = total(flooded, "bridge_mesh_peers")
        #expect((real - 1...real + 1).contains(peers), "bridge_mesh_peers \(peers) after the peer timeout, the real count is \(real)")
        let added = total(settled, "bridge_mesh_peer_events_total", "event=\"added\"")
        let lost = total(settled, "bridge_mesh_peer_events_total", "event=\"lost_")
        #expect(added - lost == peers, "peer events balance: \(added) added − \(lost) lost = \(peers) in the table")

        // The flood's cost, by reason: identities evicted by the table's bound and timed out afterwards, and
        // whatever the transport or the ingress gate dropped, each with its label.
        let evicted = total(settled, "bridge_mesh_peer_events_total", "event=\"lost_evicted\"")
        let timedOut = total(settled, "bridge_mesh_peer_events_total", "event=\"lost_timeout\"")
        #expect(evicted > 0, "evictions on /metrics by reason (lost_evicted \(evicted))")
        #expect(timedOut >= 1_000, "the flood's identities timed out (lost_timeout \(timedOut))")
        let drops = settled.filter { key, value in
            value > 0 && (key.hasPrefix("bridge_mesh_transport_dropped_total{") || key.hasPrefix("bridge_mesh_ingress_dropped_total{")
                || key.hasPrefix("bridge_mesh_node_dropped_total{"))
        }
        #expect(drops.keys.allSatisfy { $0.contains("reason=\"") }, "every drop series names its reason: \(drops)")
        print("bridge_mesh_peers: \(total(before, "bridge_mesh_peers")) before, \(peakPeers) after the flood, \(peers) settled; "
            + "lost_evicted \(evicted), lost_timeout \(timedOut); drops \(drops.sorted { $0.key < $1.key }); total \(ContinuousClock.now - started)")
        for phone in phones { phone.stop() }
    }

    /// One line from each phone (`mesh say` with the identity in `phone-<i>`), all started together; the
    /// stable IDs of the lines sent.
    func say(_ world: World, island: Int, _ text: (Int) -> String) async throws -> [String] {
        let sayers = try (0..<Self.phones).map { i in
            try world.spawn(
                ["mesh", "say", "--mesh", "tcp://127.0.0.1:\(island)", "--data-dir", "\(world.directory)/phone-\(i)",
                 "--nickname", "phone\(i)", text(i)],
                name: "say\(i)")
        }
        var said: [String] = []
        for sayer in sayers {
            guard let line = try? await sayer.waitForLine(timeout: .seconds(30), "\(sayer.name) sent", where: { $0.contains("\"sent\"") }),
                  let id = try? JSONParser().parse(line)["stableID"]?.stringValue else { continue }
            said.append(id)
        }
        return said
    }

    /// Announces the bridge took in plus inbound frames it dropped with a reason (transport and ingress gate).
    static func announcesAccounted(_ s: [String: Double]) -> Double {
        total(s, "bridge_mesh_packets_received_total", "type=\"announce\"") + total(s, "bridge_mesh_transport_dropped_total", "direction=\"in\"")
            + total(s, "bridge_mesh_ingress_dropped_total")
    }
}
