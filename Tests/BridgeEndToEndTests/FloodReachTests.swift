import BotCrypto
import BotSupport
import BridgeTestSupport
import Foundation
import Nostr
import Testing

/// Issue 14, "a 20,000-key valid flood lets ≥ 7 of 8 messages of an established sender through": the
/// bridge (`bitchat-bridge run`, a real process) subscribed to a relay on loopback that floods 20,000
/// valid channel events from 20,000 fresh keys (`hostile_relay.py --mode flood`, 1,000 a second) with
/// 8 lines of a regular among them; a mesh-only reader on the island counts what crossed.
///
/// Before: the relay's verification budget (burst 400, 200/s) ran out within the first second and the
/// regular's lines were dropped `over_budget` unverified with the flood, and what was verified went into
/// a first-in-first-out queue the flood kept full (0 of 8). Now the regular — here on the operator's
/// allow list, a protected relationship — is a priority author: its lines draw on its own verification
/// reserve on that relay and are verified all the same, and the downlink scheduler serves them ahead of
/// the first-contact keys once the minute's budget frees up.
@Suite("A valid 20,000-key flood and an established sender (real relay process, virtual radio)", TestEnvironment.needsVenv, .serialized)
struct FloodReachTests {
    static let floodKeys = 20_000
    static let lines = 8

    @Test("≥ 7 of the regular's 8 lines cross onto the mesh during the flood; the flood itself is held to the budget")
    func establishedSenderThroughAFlood() async throws {
        let world = World()
        let island = try await world.startIsland()
        let reader = try await world.startReader("reader", island: island)

        let now = Int64(Date().timeIntervalSince1970)
        let regular = try SchnorrSecretKey(bytes: [UInt8](repeating: 0x5a, count: 32))
        func frame(_ event: NostrEvent) -> String { #"["EVENT","{SUB}",\#(event.json)]"# }
        var frames: [String] = []
        var regularIDs: [String] = []
        let spacing = Self.floodKeys / Self.lines
        for i in 0..<Self.floodKeys {
            let key = try SchnorrSecretKey(bytes: [0x01, 0x02] + [UInt8](repeating: 0, count: 26) + withUnsafeBytes(of: UInt32(i + 1).bigEndian, Array.init))
            let event = try UnsignedEvent(pubkey: key.publicKey, createdAt: now, kind: 20000, tags: [["g", "u4pruy"]], content: "f\(i)")
                .signed(with: key, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
            frames.append(frame(event))
            if i % spacing == spacing / 2 {
                // One line every 15 s (the spam filter judges message timestamps: 8 lines stamped in the
                // same second would be a burst over its 6), all within the last two minutes.
                let line = try UnsignedEvent(
                    pubkey: regular.publicKey, createdAt: now - Int64(15 * (Self.lines - regularIDs.count)), kind: 20000, tags: [["g", "u4pruy"], ["n", "regular"]],
                    content: "regular line \(regularIDs.count)"
                ).signed(with: regular, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
                frames.append(frame(line))
                regularIDs.append(line.id.hex)
            }
        }
        #expect(regularIDs.count == Self.lines)
        let framesPath = world.directory + "/flood.jsonl"
        try (frames.map { JSONWriter.compact(.string($0)) }.joined(separator: "\n") + "\n")
            .write(toFile: framesPath, atomically: true, encoding: .utf8)
        let relayPort = LoopbackPort.free()
        let relay = try ChildProcess(
            TestEnvironment.venvBinary("python"),
            [Peers.fixtures + "/hostile_relay.py", "--port", "\(relayPort)", "--mode", "flood", "--frames", framesPath,
             "--count", "\(frames.count)", "--rate", "1000"],
            name: "flood-relay")
        world.processes.append(relay)
        try await relay.waitForLine("flood relay READY") { $0.hasPrefix("READY ") }

        // The regular is on the operator's allow list (policy.json in the bridge's data directory).
        let dataDirectory = world.directory + "/gateway"
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try #"{"allow": ["nostr:\#(regular.publicKey.hex)"]}"#.write(toFile: dataDirectory + "/policy.json", atomically: true, encoding: .utf8)
        // The bridge's defaults, text mirror (down) included: each line is a carrier and a persona's mirror
        // line under one budget, the flood's as well as the regular's. (Before the established quota was
        // counted per lane, only 6 of 8 of the regular's carriers crossed with the mirror on.)
        let bridge = try world.spawn(["run"], environment: [
            "BRIDGE_GEOHASH": "u4pruy", "BRIDGE_DATA_DIR": dataDirectory, "BRIDGE_RELAYS": "ws://127.0.0.1:\(relayPort)",
            "BRIDGE_RELAY_DIRECTORY": "off", "BRIDGE_MESH": "tcp://127.0.0.1:\(island)", "BRIDGE_HTTP_LISTEN": "off",
            "BRIDGE_NICKNAME": "gateway", "BRIDGE_RENDEZVOUS": "off", "BRIDGE_CHANNEL_LEVELS": "none",
        ], name: "gateway")
        do {
            // A gateway without the rendezvous role announces the gateway capability only.
            _ = try await reader.waitForLine(timeout: .seconds(30), "the gateway's announce") {
                $0.contains("\"peer\"") && $0.contains("\"gateway\"")
            }
        } catch {
            Issue.record("the reader never verified the bridge's announce:\n\(bridge.transcript.suffix(4_000))")
            throw error
        }
        _ = try await relay.waitForLine(timeout: .seconds(120), "the flood written") { $0.hasPrefix("FLOODED ") }

        // The first 30 carriers spend the minute's budget within the first seconds; the regular's lines
        // wait for the window and go first: ≤ 60 s + the holds after the last line arrives.
        let deadline = ContinuousClock.now + .seconds(150)
        var crossed = 0
        while ContinuousClock.now < deadline {
            crossed = regularIDs.filter { !carriers(reader, eventID: $0).isEmpty }.count
            if crossed == Self.lines { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(crossed >= 7, "\(crossed) of \(Self.lines) of the regular's lines crossed")
        for id in regularIDs { #expect(carriers(reader, eventID: id).count <= 1, "\(id) carried twice") }
        // The flood was real and contended: the budget let only a sliver of it onto the mesh.
        let floodCarried = reader.stdoutLines.filter { $0.contains("\"carrier\"") }.count - crossed
        let kinds = ["carrier", "message", "peer"].map { kind in "\(kind): \(reader.stdoutLines.filter { $0.contains("\"event\":\"\(kind)\"") }.count)" }
        #expect(floodCarried > 0 && floodCarried < 200, "\(floodCarried) flood carriers; reader saw \(kinds)\n\(bridge.stderrLines.filter { $0.contains("summary") || $0.contains("downlinked") }.suffix(5))")
        bridge.stop()
    }
}
