import BotSupport
import BridgeTestSupport
import Foundation
import Testing

extension World {
    /// The bridge's stranger-cache record of the mesh identity whose nickname is `nickname`, read by
    /// `identities list --json` from another process while the bridge runs.
    func identityRecord(_ bridge: String, nickname: String) async throws -> JSONValue? {
        let list = try spawn(["identities", "list", "--json", "--data-dir", "\(directory)/\(bridge)"], name: "identities")
        #expect(try await list.waitForExit() == 0, "\(list.transcript)")
        let records = try JSONParser().parse(list.stdoutLines.joined(separator: "\n")).arrayValue ?? []
        return records.first { $0["kind"] == .string("mesh") && $0["nickname"] == .string(nickname) }
    }
}

/// Trust through the stranger cache (the reach issue), on real processes: the bridge on two islands, so
/// whatever the reader on island B hears from island A, the bridge relayed; with the text mirror up, what
/// the bridge judged and carried shows on the channel. The bridge's live table keeps a silent peer only
/// 5 s here (`BRIDGE_MESH_PEER_TIMEOUT`), so seconds of silence stand for the minutes of the issue.
@Suite("Pins end to end (real relay, virtual radio, real processes)", TestEnvironment.needsVenv, .serialized)
struct PinEndToEndTests {
    @Test("""
        a phone that announced once is carried every time it speaks after the table forgot it; a copied-Noise-key \
        impostor is refused after the real phone's silence and after a bridge restart, counted and shown by identities
        """)
    func slowAnnouncerAndImpostor() async throws {
        let world = World()
        try await world.startRelay()
        let islandA = try await world.startIsland()
        let islandB = try await world.startIsland()
        let listener = try await world.startChannelListener()
        let http = LoopbackPort.free()
        let settings = [
            "BRIDGE_MESH": "tcp://127.0.0.1:\(islandA),tcp://127.0.0.1:\(islandB)", "BRIDGE_TEXT_MIRROR": "up",
            "BRIDGE_HTTP_LISTEN": "127.0.0.1:\(http)", "BRIDGE_MESH_PEER_TIMEOUT": "5",
        ]
        var bridge = try await world.startBridge("bridge", island: islandA, extra: settings)
        let reader = try await world.startReader("reader", island: islandB)
        try await world.waitForBridges(reader, count: 1)

        // The Android model: announces when its link comes up and when it first verifies a peer, then not for
        // 300 s (`PowerManager.kt`, low battery); it speaks every 7 s, each time after more than the table's 5 s.
        // The reader learns the phone first, so a message relayed ahead of the announce is not lost on it.
        try await world.introduce("slow", island: islandA, to: reader)
        let lines = ["slow one", "slow two", "slow three"]
        let phone = try world.spawn(
            ["mesh", "listen", "--mesh", "tcp://127.0.0.1:\(islandA)", "--data-dir", "\(world.directory)/phone-slow",
             "--nickname", "slow", "--announce-interval", "300", "--say-every", "7"] + lines.flatMap { ["--say", $0] },
            name: "slow")
        let sent = try await phone.waitForLines(count: 3, timeout: .seconds(60), "the slow phone's three lines") {
            $0.contains("\"sent\"")
        }
        let ids = sent.compactMap { try? JSONParser().parse($0)["stableID"]?.stringValue }
        _ = try await listener.waitForLine(timeout: .seconds(20), "the third line mirrored") { $0.contains(lines[2]) }
        _ = try await reader.waitForLine(timeout: .seconds(20), "the third line relayed") { $0.contains(ids[2]) }
        for (text, id) in zip(lines, ids) {
            #expect(channelTexts(listener).filter { $0 == text }.count == 1, "\(text) carried to the channel once")
            #expect(meshMessages(reader).filter { $0 == id }.count == 1, "\(text) relayed to island B once")
        }
        phone.stop(signal: SIGKILL)
        // Silence, then an impostor: the same Noise key, another signing key.
        try await Task.sleep(for: .seconds(6))
        try await impostorIsRefused(world, listener: listener, reader: reader, island: islandA, text: "impostor before restart")
        let refusedOnce = try #require(try await world.identityRecord("bridge", nickname: "slow"))
        #expect((refusedOnce["pin_refusals"]?.integerValue ?? 0) >= 1, "\(refusedOnce)")
        // /metrics is the snapshot of the last status publish (every 2 s): wait for the one after the refusal.
        let metrics = try await scrapeMetrics(port: http) {
            $0.contains("bridge_identity_pin_refusals_total") && !$0.contains("bridge_identity_pin_refusals_total 0\n")
        }
        #expect(!metrics.contains("bridge_identity_pin_refusals_total 0\n"), "\(metrics)")
        // The engine's pin family moved too: lines verified by the pin alone, the impostor refused.
        for event in ["verified_by_pin", "refused"] {
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("bridge_mesh_pins_total{event=\"\(event)\"}") }
            #expect((line?.split(separator: " ").last.flatMap { Double($0) } ?? 0) >= 1, "\(event): \(line ?? "absent")")
        }

        #expect(bridge.stderrLines.filter { $0.contains("announce refused") }.count == 1, "\(bridge.transcript)")

        // After a restart the pin comes from the cache alone.
        bridge.stop()
        bridge = try await world.startBridge("bridge", island: islandA, extra: settings)
        try await impostorIsRefused(world, listener: listener, reader: reader, island: islandA, text: "impostor after restart")
        let refusedTwice = try #require(try await world.identityRecord("bridge", nickname: "slow"))
        #expect((refusedTwice["pin_refusals"]?.integerValue ?? 0) > (refusedOnce["pin_refusals"]?.integerValue ?? 0), "\(refusedTwice)")
        // The bridge logged the refusal once for this identity, not once per announce.
        let warnings = bridge.stderrLines.filter { $0.contains("announce refused") }
        #expect(warnings.isEmpty, "the restarted bridge had already logged this identity's first refusal: \(warnings)")
    }

    /// An impostor of `phone-slow` announces and speaks; a barrier from another phone crosses after it. The
    /// impostor's announce is not relayed to island B and its line is neither relayed nor carried.
    private func impostorIsRefused(
        _ world: World, listener: ChildProcess, reader: ChildProcess, island: Int, text: String
    ) async throws {
        let impostor = try world.spawn(
            ["mesh", "listen", "--mesh", "tcp://127.0.0.1:\(island)", "--data-dir", "\(world.directory)/phone-slow",
             "--new-signing-key", "--nickname", "impostor", "--say", text],
            name: "impostor")
        let sent = try await impostor.waitForLine("the impostor's line") { $0.contains("\"sent\"") }
        let id = try #require(try JSONParser().parse(sent)["stableID"]?.stringValue)
        let barrier = "barrier after \(text)"
        _ = try await world.say(barrier, as: "organiser", island: island)
        _ = try await listener.waitForLine(timeout: .seconds(20), "the barrier carried") { $0.contains(barrier) }
        impostor.stop(signal: SIGKILL)
        #expect(!channelTexts(listener).contains(text), "the impostor's line was carried")
        #expect(!meshMessages(reader).contains(id), "the impostor's line was relayed")
        #expect(!reader.stdoutLines.contains { $0.contains("\"peer\"") && $0.contains("\"impostor\"") },
                "the impostor's announce was relayed")
    }
}
