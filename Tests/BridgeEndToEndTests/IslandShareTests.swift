import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// Waits until every bridge's latest "island bridges" log line names at least one other gateway: the
/// bridges of one island have heard each other's announces, so their carrier choices agree.
func waitForIslandAgreement(_ bridges: [ChildProcess], timeout: Duration = .seconds(90)) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        let expired = ContinuousClock.now >= deadline
        let agreed = bridges.allSatisfy { bridge in
            guard let last = bridge.stderrLines.last(where: { $0.contains("\"island bridges\"") }),
                let gateways = try? JSONParser().parse(last)["island.gateways"], case .array(let peers) = gateways
            else { return false }
            return !peers.isEmpty
        }
        if agreed { return }
        if expired { throw IslandAgreementTimeout(transcripts: bridges.map(\.transcript).joined(separator: "\n")) }
        try await Task.sleep(for: .milliseconds(100))
    }
}

struct IslandAgreementTimeout: Error, CustomStringConvertible {
    let transcripts: String
    var description: String { "timed out waiting for the island's bridges to hear each other:\n\(transcripts)" }
}

/// The event ids a bridge logged as downlinked, with repeats.
func downlinked(_ bridge: ChildProcess) -> [String] {
    bridge.stderrLines.compactMap { line in
        guard line.contains("\"downlinked\""), let value = try? JSONParser().parse(line) else { return nil }
        return value["event.id"]?.stringValue
    }
}

@Suite("Bridges sharing an island (lossy virtual radio)", TestEnvironment.needsVenv, .serialized)
struct IslandShareTests {
    @Test("""
        three bridges on two islands, 20 % radio loss: each of 50 channel posts goes onto each island at most \
        once from the bridges (their own logs), ≥ 95 % exactly once
        """)
    func lossyIslands() async throws {
        let world = World()
        try await world.startRelay()
        let island1 = try await world.startIsland(loss: 0.2)
        let island2 = try await world.startIsland(loss: 0.2)
        // Carriers only: with the text mirror (on by default) each post costs two broadcasts, and island 2's
        // one bridge would need 100 of the 30-a-minute budget — over three minutes, past the 60-item queue.
        // The mirror lane follows the same carrier choice as the channel levels.
        let carriersOnly = ["BRIDGE_TEXT_MIRROR": "off"]
        let bridgeA = try await world.startBridge("bridge-a", island: island1, extra: carriersOnly)
        let bridgeB = try await world.startBridge("bridge-b", island: island1, extra: carriersOnly)
        let bridgeC = try await world.startBridge("bridge-c", island: island2, extra: carriersOnly)
        try await waitForIslandAgreement([bridgeA, bridgeB])

        // 50 posts from 50 keys (a fresh key per `nostr post`), five posters at a time.
        var posted: [String] = []
        for batch in stride(from: 0, to: 50, by: 5) {
            let posters = try (batch..<batch + 5).map { i in
                try world.spawn(
                    ["nostr", "post", "--geohash", "u4pruy", "--relay", world.relayURL, "--pow", "8", "shared \(i)"],
                    environment: ["BRIDGE_DATA_DIR": "\(world.directory)/poster-\(i)"], name: "poster-\(i)")
            }
            for poster in posters {
                let line = try await poster.waitForLine("post") { $0.contains("\"published\"") }
                posted.append(try #require(try JSONParser().parse(line)["event"]?["id"]?.stringValue))
            }
        }
        // Island 2 has one bridge and the 30-a-minute budget: the last posts go out about a minute after the first.
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let island1 = Set(downlinked(bridgeA) + downlinked(bridgeB))
            let island2 = Set(downlinked(bridgeC))
            if posted.allSatisfy({ island1.contains($0) && island2.contains($0) }) { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        try await Task.sleep(for: .seconds(12))  // the handover window (10 s) and a hold: any late second copy

        let ids = Set(posted)
        let counts1 = (downlinked(bridgeA) + downlinked(bridgeB)).filter(ids.contains).reduce(into: [:]) { $0[$1, default: 0] += 1 }
        let counts2 = downlinked(bridgeC).filter(ids.contains).reduce(into: [:]) { $0[$1, default: 0] += 1 }
        for (island, counts) in [("island 1", counts1), ("island 2", counts2)] {
            let twice = counts.filter { $0.value > 1 }
            let once = posted.filter { counts[$0] == 1 }.count
            #expect(twice.isEmpty, "\(island): \(twice.count) posts downlinked more than once")
            let bridges = island == "island 1" ? [bridgeA, bridgeB] : [bridgeC]
            let missing = posted.filter { counts[$0] == nil }.prefix(3).map { id in
                bridges.flatMap(\.stderrLines).filter { $0.contains(id) || $0.contains(String(id.prefix(16))) }
            }
            #expect(once * 100 >= posted.count * 95, "\(island): \(once) of \(posted.count) exactly once; missing: \(missing)")
        }
        // Both bridges of island 1 carried a share.
        let shareA = downlinked(bridgeA).filter(ids.contains).count
        let shareB = downlinked(bridgeB).filter(ids.contains).count
        #expect(shareA > 5 && shareB > 5, "island 1 split \(shareA) / \(shareB)")
        print("island share: island 1 \(shareA) + \(shareB), island 2 \(counts2.count) of \(posted.count)")
    }
}
