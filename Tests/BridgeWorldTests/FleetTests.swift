import BotCrypto
import BotSupport
import Bridge
import BridgeApp
import BridgeCore
import BridgeTesting
import Identity
import Nostr
import Testing

/// Fleet moderation in the in-process world (issue 18): three bridges (one island each), one relay, one operator key
/// held by bridge 1. A block made on bridge 1 (what its console's Block does: ``OperatorInput/fleetChange(_:)``)
/// reaches bridges 2 and 3 as the operator's signed fleet list, and bridge 3 keeps it across a restart while the
/// relay is down. The console's HTTP side of the same button is `ConsoleBrowserTests`' and the console suites'.
@Suite("World: fleet moderation")
struct FleetTests {
    static func applied(_ bridge: TestBridge, after mark: Int, from origin: String) async -> LogRecord? {
        await bridge.log.lines.first(after: mark) { $0.message == "fleet list applied" && $0.jsonLine.contains("\"fleet.from\":\"\(origin)\"") }
    }

    @Test("a block on bridge 1 hides the sender on bridges 2 and 3 within 5 s, and on bridge 3 after a restart with the relay down")
    func blockReachesTheFleet() async throws {
        let site = Site(name: "fleet")
        let relay = try site.relay()
        let secret = [UInt8](repeating: 77, count: 32)
        let operatorKey = try SchnorrSecretKey(bytes: secret)
        let fleet = ["BRIDGE_OPERATOR_KEYS": operatorKey.publicKey.hex]
        // Bridge 1 holds the operator key (mode 0600).
        try FileIO.makeDirectory(site.directory + "/bridge-1", mode: 0o700)
        try FileIO.writeAtomically(Array(Hex.encode(secret).utf8), to: site.directory + "/bridge-1/" + OperatorKeys.secretFileName, mode: 0o600)
        let islands = [site.segment(), site.segment(), site.segment()]
        var bridges: [TestBridge] = []
        for (index, island) in islands.enumerated() {
            bridges.append(try await site.bridge("bridge-\(index + 1)", relays: [relay], segments: [island], settings: fleet))
        }
        #expect(bridges[0].log.lines.all.contains { $0.message == "bridge starting" && $0.jsonLine.contains("npub1") })
        #expect(!bridges[0].log.lines.all.contains { $0.jsonLine.contains(Hex.encode(secret)) }, "the secret is never logged")
        var readers: [TestPhone] = []
        for index in 1...2 {
            let reader = await site.phone("reader-\(index + 1)", on: [islands[index]])
            #expect(await reader.meets(bridges[index]))
            readers.append(reader)
        }

        // Mallory's first line crosses everywhere.
        let mallory = site.poster("mallory")
        let before = try mallory.post("hello before the block", to: relay)
        for bridge in bridges { #expect(await bridge.verdict(on: before.id.hex)?.kind == .passed) }
        #expect(await site.advance(until: {
            for reader in readers where !(await reader.heard(carriers: [before.id])) { return false }
            return true
        }), "the first line crossed everywhere")

        // Bridge 1 blocks her; bridges 2 and 3 apply the operator's list from the relay.
        let marks = bridges.map { $0.log.lines.all.count }
        let blockedAt = ContinuousClock.now
        bridges[0].coordinator.submit(OperatorInput.fleetChange(.block(try IdentityKey(qualified: "nostr:\(mallory.key.publicKey.hex)"))))
        for index in 1...2 {
            #expect(await Self.applied(bridges[index], after: marks[index], from: "relay") != nil, "bridge-\(index + 1)")
            let elapsed = ContinuousClock.now - blockedAt
            #expect(elapsed < .seconds(5), "bridge-\(index + 1) took \(elapsed)")
        }
        let blocked = try mallory.post("hello while blocked", to: relay)
        for bridge in bridges[1...] {
            let verdict = await bridge.verdict(on: blocked.id.hex)
            #expect(verdict?.kind == .hidden && verdict?.rule == "blocked", "\(String(describing: verdict))")
        }

        // Bridge 3 restarts while the relay is down: the kept list applies before any relay answers.
        let third = bridges[2]
        let mark = third.log.lines.all.count
        relay.goDown()
        async let restarted: Void = third.restart()
        let kept = await Self.applied(third, after: mark, from: "kept file")
        #expect(kept?.jsonLine.contains("\"fleet.blocked\":1") == true, "\(String(describing: kept?.jsonLine))")
        relay.comeBack()
        try await restarted
        let afterRestart = try mallory.post("hello after the restart", to: relay)
        #expect(await third.verdict(on: afterRestart.id.hex)?.rule == "blocked")
        #expect(await bridges[1].verdict(on: afterRestart.id.hex)?.rule == "blocked")
        await site.advance(by: 2_000)  // past the longest downlink hold: a late carrier of a blocked post would be here
        for reader in readers { #expect(reader.carriers(of: blocked.id).isEmpty) }
        #expect(readers[1].carriers(of: afterRestart.id).isEmpty)
        #expect(readers[0].carriers(of: before.id).count == 1)
        await site.stop()
    }
}
