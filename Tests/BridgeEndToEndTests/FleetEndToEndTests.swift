import BotCrypto
import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// Issue 18, fleet moderation: three bridges (one island each), one relay, one operator key held by bridge 1.
/// A block made in bridge 1's console (HTTP POST with the token and the same origin) reaches bridges 2 and 3 as
/// the operator's signed fleet list, and bridge 3 keeps it across a restart while the relay is down.
@Suite("Fleet moderation end to end (three bridges, one relay, one operator key)", TestEnvironment.needsVenv, .serialized,
       .timeLimit(.minutes(3)))
struct FleetEndToEndTests {
    /// A POST to the console through Python's urllib (a real HTTP client); returns the status.
    static func post(_ url: String, token: String, origin: String) async throws -> Int {
        let script = """
            import sys, urllib.request, urllib.error
            req = urllib.request.Request(sys.argv[1], method="POST", data=b"", headers={"Authorization": "Bearer " + sys.argv[2], "Origin": sys.argv[3]})
            try:
                print(urllib.request.urlopen(req, timeout=10).status)
            except urllib.error.HTTPError as e:
                print(e.code)
            """
        let child = try ChildProcess("/usr/bin/python3", ["-c", script, url, token, origin], name: "console-post")
        _ = try await child.waitForExit(timeout: .seconds(30))
        return Int(child.stdoutLines.last ?? "") ?? -1
    }

    @Test("a console block on bridge 1 hides the sender on bridges 2 and 3 within 5 s, and on bridge 3 after a restart with the relay down")
    func blockReachesTheFleet() async throws {
        let world = World()
        let secret = [UInt8](repeating: 77, count: 32)
        let operatorKey = try SchnorrSecretKey(bytes: secret)
        let fleetEnvironment = ["BRIDGE_OPERATOR_KEYS": operatorKey.publicKey.hex]
        // Bridge 1 holds the operator key (mode 0600) and a console on loopback with its token.
        let data1 = "\(world.directory)/bridge-1"
        try FileManager.default.createDirectory(atPath: data1, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileIO.writeAtomically(Array(Hex.encode(secret).utf8), to: data1 + "/operator.key", mode: 0o600)
        let tokenRun = try world.spawn(["console-token", "--data-dir", data1], name: "console-token")
        #expect(try await tokenRun.waitForExit() == 0, "\(tokenRun.transcript)")
        let token = try #require(tokenRun.stdoutLines.last?.trimmingCharacters(in: .whitespaces))
        let httpPort = LoopbackPort.free()

        try await world.startRelay()
        var islands: [Int] = []
        for _ in 0..<3 { islands.append(try await world.startIsland()) }
        let bridge1 = try await world.startBridge(
            "bridge-1", island: islands[0], extra: fleetEnvironment.merging(["BRIDGE_HTTP_LISTEN": "127.0.0.1:\(httpPort)"]) { $1 })
        let bridge2 = try await world.startBridge("bridge-2", island: islands[1], extra: fleetEnvironment)
        var bridge3 = try await world.startBridge("bridge-3", island: islands[2], extra: fleetEnvironment)
        #expect(bridge1.stderrLines.contains { $0.contains("\"bridge starting\"") && $0.contains("fleet.publisher") && $0.contains("npub1") })
        #expect(!bridge1.stderrLines.contains { $0.contains(Hex.encode(secret)) }, "the secret is never logged")
        let reader2 = try await world.startReader("reader-2", island: islands[1])
        let reader3 = try await world.startReader("reader-3", island: islands[2])
        try await world.waitForBridges(reader2, count: 1)
        try await world.waitForBridges(reader3, count: 1)

        // Mallory's first line crosses everywhere.
        let before = try await world.postWithKey("hello before the block", as: "mallory")
        _ = try await reader2.waitForLine("mallory crosses on island 2") { $0.contains(before.id) }
        _ = try await reader3.waitForLine("mallory crosses on island 3") { $0.contains(before.id) }

        // Block her in bridge 1's console.
        let base = "http://127.0.0.1:\(httpPort)"
        let postedAt = ContinuousClock.now
        let status = try await Self.post("\(base)/api/senders/nostr:\(before.pubkey)/block", token: token, origin: base)
        #expect(status == 200)
        // The block is made when the POST is answered; the 5 s bound runs from there (the client process's own
        // start-up on a loaded machine is not the bridges' delay), the figure from the POST's start is printed too.
        let blockedAt = ContinuousClock.now
        for (name, bridge) in [("bridge-2", bridge2), ("bridge-3", bridge3)] {
            _ = try await bridge.waitForLine(stderr: true, timeout: .seconds(30), "\(name) applies the fleet list") {
                $0.contains("\"fleet list applied\"") && $0.contains("\"relay\"")
            }
            let elapsed = ContinuousClock.now - blockedAt
            print("fleet block: \(name) applied it \(elapsed) after the console's answer (\(ContinuousClock.now - postedAt) after the POST started)")
            #expect(elapsed < .seconds(5), "\(name) took \(elapsed)")
        }
        let blocked = try await world.postWithKey("hello while blocked", as: "mallory")
        let barrier = try await world.postWithKey("the stage opens at eight", as: "organiser")
        _ = try await reader2.waitForLine("the barrier on island 2") { $0.contains(barrier.id) }
        _ = try await reader3.waitForLine("the barrier on island 3") { $0.contains(barrier.id) }
        for bridge in [bridge2, bridge3] {
            _ = try await bridge.waitForLine(stderr: true, "hidden as blocked") {
                $0.contains("\"hidden\"") && $0.contains("\"blocked\"") && $0.contains(blocked.id)
            }
        }

        // Bridge 3 restarts while the relay is down: the kept list applies before any relay answers.
        world.relay?.stop()
        bridge3.stop()
        _ = try await bridge3.waitForExit(timeout: .seconds(15))
        bridge3 = try world.spawn(["run"], environment: [
            "BRIDGE_GEOHASH": "u4pruy", "BRIDGE_DATA_DIR": "\(world.directory)/bridge-3", "BRIDGE_RELAYS": world.relayURL,
            "BRIDGE_RELAY_DIRECTORY": "off", "BRIDGE_MESH": "tcp://127.0.0.1:\(islands[2])", "BRIDGE_HTTP_LISTEN": "off",
            "BRIDGE_NICKNAME": "bridge-3", "BRIDGE_POW_BITS": "8",
        ].merging(fleetEnvironment) { $1 }, name: "bridge-3-again")
        let kept = try await bridge3.waitForLine(stderr: true, "bridge 3 applies the kept list") {
            $0.contains("\"fleet list applied\"") && $0.contains("kept file")
        }
        #expect(kept.contains("\"fleet.blocked\":1"), "\(kept)")
        try await world.startRelay()
        _ = try await bridge3.waitForLine(stderr: true, timeout: .seconds(60), "bridge 3 reconnects") { $0.contains("relay connected") }
        let afterRestart = try await world.postWithKey("hello after the restart", as: "mallory")
        let barrier2 = try await world.postWithKey("gates close at midnight", as: "organiser")
        _ = try await reader3.waitForLine("the second barrier on island 3") { $0.contains(barrier2.id) }
        _ = try await bridge3.waitForLine(stderr: true, "hidden after the restart") {
            $0.contains("\"hidden\"") && $0.contains("\"blocked\"") && $0.contains(afterRestart.id)
        }
        try await Task.sleep(for: .seconds(2))  // longest downlink hold: a late carrier of a blocked post
        for reader in [reader2, reader3] {
            #expect(carriers(reader, eventID: blocked.id).isEmpty)
        }
        #expect(carriers(reader3, eventID: afterRestart.id).isEmpty)
        #expect(carriers(reader2, eventID: before.id).count == 1)
    }
}
