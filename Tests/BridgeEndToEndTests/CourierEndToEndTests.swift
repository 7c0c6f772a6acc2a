import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// The courier gateway through `bitchat-bridge run` (issue 24): a real relay (nostr-sdk's), a radio hub, and phones
/// modelled from COURIER.md §6 alone (`tools/peers/courier_phone.py`: its own envelope, tag, framing and signatures,
/// nothing of the bridge's codec), which also plays the other gateways that park drops on the relay.
@Suite("Courier gateway end to end (run, a real relay, a phone model from COURIER.md §6)", TestEnvironment.needsVenv, .serialized)
struct CourierEndToEndTests {
    static let script = Peers.fixtures + "/courier_phone.py"

    /// One run of the phone model's one-shot commands: its JSON output.
    static func phoneTool(_ world: World, _ arguments: [String]) async throws -> JSONValue {
        let child = try world.spawnPython([script] + arguments, name: "courier-\(arguments[0])")
        let status = try await child.waitForExit(timeout: .seconds(30))
        #expect(status == 0, "\(arguments[0]): \(child.transcript)")
        return try JSONParser().parse(child.stdoutLines.last ?? "null")
    }

    /// Every kind-1401 event the relay holds now.
    static func drops(_ world: World) async throws -> [JSONValue] {
        let child = try world.spawnPython([script, "drops", "--relay", world.relayURL, "--seconds", "1"], name: "courier-drops")
        _ = try await child.waitForExit(timeout: .seconds(20))
        return try child.stdoutLines.map { try JSONParser().parse($0) }
    }

    static func mail(_ phone: ChildProcess) throws -> [JSONValue] {
        try phone.stdoutLines.filter { $0.hasPrefix("MAIL ") }.map { try JSONParser().parse(String($0.dropFirst(5))) }
    }

    @Test("deposits become drops under fresh keys; a drop reaches its verified phone once, byte-equal and signed; held mail reaches its recipient on arrival; nothing for bad drops or bad deposits; nothing twice after kill -9", .timeLimit(.minutes(3)))
    func courierThroughRun() async throws {
        let world = World()
        try await world.startRelay()
        let island = try await world.startIsland()
        let http = LoopbackPort.free()
        let environment = ["BRIDGE_HTTP_LISTEN": "127.0.0.1:\(http)"]
        var bridge = try await world.startBridge("bridge", island: island, extra: environment)
        let hub = ["--hub", "\(island)"]

        // Bob's phone is here; the bridge watches his tags once it verified his announce (subscription debounce 5 s).
        let bob = try world.spawnPython([Self.script, "phone"] + hub + ["--seed", "2", "--seconds", "170"], name: "bob")
        let ready = try JSONParser().parse(String(try await bob.waitForLine("bob ready") { $0.hasPrefix("READY ") }.dropFirst(6)))
        _ = try await scrapeMetrics(port: http, timeout: .seconds(30)) { $0.contains("bitchat_bridge_courier_subscriptions 1") }

        // A drop for Bob: handed over once, as a directed 0x04 with TTL 7 and the bridge's valid signature, byte-equal.
        let forBob = try await Self.phoneTool(world, ["seal", "--recipient-seed", "2"])
        let envelope = try #require(forBob["envelope"]?.stringValue)
        #expect(ready["tags"]?.arrayValue?.contains(forBob["tag"] ?? .null) == true)
        _ = try await Self.phoneTool(world, ["drop", "--relay", world.relayURL, "--envelope", envelope])
        _ = try await bob.waitForLine(timeout: .seconds(30), "Bob's mail") { $0.hasPrefix("MAIL ") }
        let got = try #require(try Self.mail(bob).first)
        #expect(got["envelope"]?.stringValue == envelope && got["ttl"] == .integer(7) && got["signatureValid"] == .bool(true), "\(got)")

        // Nothing for a mislabeled drop (Bob's tag as x, a stranger's envelope inside), an expired envelope (its
        // expiration tag in the future, or the relay would refuse it), bad base64, an expiry beyond 25 h, or an
        // expiration tag that does not match. (A drop with a stranger's tag as x never reaches the bridge: the relay
        // sends only what its subscriptions name.)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let expired = try await Self.phoneTool(world, ["seal", "--recipient-seed", "2", "--expiry-ms", "\(now - 1_000)"])
        let tooFar = try await Self.phoneTool(world, ["seal", "--recipient-seed", "2", "--expiry-ms", "\(now + 26 * 3_600_000)"])
        let stranger = try await Self.phoneTool(world, ["seal", "--recipient-seed", "99"])
        let another = try #require(try await Self.phoneTool(world, ["seal", "--recipient-seed", "2"])["envelope"]?.stringValue)
        for arguments in [
            ["--envelope", stranger["envelope"]?.stringValue ?? "", "--x", forBob["tag"]?.stringValue ?? ""],
            ["--envelope", expired["envelope"]?.stringValue ?? "", "--expiration", "\(now / 1000 + 3_600)"],
            ["--envelope", tooFar["envelope"]?.stringValue ?? ""],
            ["--envelope", another, "--content", "not base64!"],
            ["--envelope", another, "--expiration", "\(now / 1000 + 7_200)"],
        ] {
            _ = try await Self.phoneTool(world, ["drop", "--relay", world.relayURL] + arguments)
        }

        // Two phones deposit envelopes for Carol and for Dave, who are not here: each becomes a drop at once, under a key
        // used once, x = its tag, expiration = its expiry, content = the envelope with its copies TLV left out (1).
        // (A phone new to the bridge each time: the bridge announces back to a newcomer at once.)
        var deposited: [JSONValue] = []
        for (sender, recipient) in [("1", "3"), ("11", "4")] {
            deposited.append(try await Self.phoneTool(world, ["deposit"] + hub + ["--seed", sender, "--recipient-seed", recipient, "--out", "\(world.directory)/deposit-\(recipient).json"]))
        }
        // And two it must refuse: a flipped signature bit, an expiry beyond 25 h.
        _ = try await Self.phoneTool(world, ["deposit"] + hub + ["--seed", "12", "--recipient-seed", "5", "--bad-signature", "--out", "\(world.directory)/bad-1.json"])
        _ = try await Self.phoneTool(world, ["deposit"] + hub + ["--seed", "13", "--recipient-seed", "6", "--expiry-ms", "\(now + 26 * 3_600_000)", "--out", "\(world.directory)/bad-2.json"])
        let expectedTags = Set(deposited.compactMap { $0["tag"]?.stringValue })
        var published: [JSONValue] = []
        for _ in 0..<40 {
            published = try await Self.drops(world).filter { drop in
                expectedTags.contains(drop["tags"]?.arrayValue?.first?.arrayValue?.last?.stringValue ?? "")
            }
            if published.count >= 2 { break }
        }
        #expect(published.count == 2, "one drop per deposit: \(published)")
        for deposit in deposited {
            let bytes = try Hex.decode(try #require(deposit["envelope"]?.stringValue))
            let drop = try #require(published.first { $0["tags"]?.arrayValue?.first?.arrayValue?.last == deposit["tag"] })
            #expect(try Base64.decode(drop["content"]?.stringValue ?? "") == Array(bytes.dropLast(4)), "copies 4 → the TLV left out")
            let expiry = Int64(deposit["expiryMs"]?.integerValue ?? 0) / 1000
            #expect(drop["tags"]?.arrayValue?.last == .array([.string("expiration"), .string(String(expiry))]))
        }
        #expect(Set(published.compactMap { $0["pubkey"]?.stringValue }).count == 2, "a fresh key per publish")

        // Carol arrives: the envelope held for her is handed over as deposited (copies 4 kept), signed by the bridge.
        let carol = try world.spawnPython([Self.script, "phone"] + hub + ["--seed", "3", "--seconds", "120"], name: "carol")
        _ = try await carol.waitForLine(timeout: .seconds(40), "Carol's mail") { $0.hasPrefix("MAIL ") }
        let carolsMail = try Self.mail(carol)
        #expect(carolsMail.count == 1 && carolsMail.first?["envelope"] == deposited[0]["envelope"]
            && carolsMail.first?["signatureValid"] == .bool(true), "\(carolsMail)")

        // /metrics after the traffic (counts only).
        let metrics = try await scrapeMetrics(port: http) { $0.contains("bitchat_bridge_courier_deliveries_total{outcome=\"delivered\"} 2") }
        for line in [
            "bitchat_bridge_courier_deposits_total{outcome=\"accepted\"} 2", "bitchat_bridge_courier_deposits_total{outcome=\"unverified_depositor\"} 1",
            "bitchat_bridge_courier_deposits_total{outcome=\"expiry_too_far\"} 1", "bitchat_bridge_courier_drops_total{outcome=\"queued\"} 1",
            "bitchat_bridge_courier_drops_total{outcome=\"tag_mismatch\"} 1", "bitchat_bridge_courier_drops_total{outcome=\"expired\"} 1",
            "bitchat_bridge_courier_drops_total{outcome=\"expiry_too_far\"} 1", "bitchat_bridge_courier_drops_total{outcome=\"bad_base64\"} 1",
            "bitchat_bridge_courier_drops_total{outcome=\"expiration_mismatch\"} 1", "bitchat_bridge_courier_publishes_total{outcome=\"confirmed\"} 2",
        ] {
            #expect(metrics.contains(line), "\(line)")
        }

        // kill -9 and the same data directory again: the relay sends its backlog to the new subscriptions; the drops
        // already taken are remembered on disk, so Bob and Carol get nothing twice.
        bridge.stop(signal: SIGKILL)
        bridge = try await world.startBridge("bridge", island: island, extra: environment)
        _ = try await scrapeMetrics(port: http, timeout: .seconds(60)) {
            $0.contains("bitchat_bridge_courier_drops_total{outcome=\"duplicate\"}")
        }
        try await Task.sleep(for: .seconds(2))
        #expect(try Self.mail(bob).count == 1, "Bob: nothing twice")
        #expect(try Self.mail(carol).count == 1, "Carol: nothing twice")
        // The log names no tag and no envelope.
        let log = bridge.stderrLines.joined(separator: "\n")
        for secret in [envelope, forBob["tag"]?.stringValue ?? "-", deposited[1]["envelope"]?.stringValue ?? "-"] {
            #expect(!log.contains(secret))
        }
    }
}
