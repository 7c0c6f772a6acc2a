import BitchatWire
import BotCrypto
import BotSupport
import BridgeTestSupport
import Foundation
@testable import Mesh
import Testing

/// Differential interop against bitchat-cli 0.2.3 (PyPI), the most faithful independent codec: ≥ 1 000
/// randomized cases each way, one Python process per direction (Fixtures/bitchat_cli_driver.py).
@Suite("Differential: bitchat-cli", TestEnvironment.needsVenv)
struct BitchatCLIDifferentialTests {
    static let cases = 1_000
    static let driver = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/bitchat_cli_driver.py").path

    @Test(.timeLimit(.minutes(2)))
    func packetsBitchatCLIEncodesDecodeAndVerifyHere() async throws {
        let python = try ChildProcess(TestEnvironment.venvBinary("python"), [Self.driver, "generate", String(Self.cases), "20261129"], name: "bitchat-cli generate")
        #expect(try await python.waitForExit(timeout: .seconds(90)) == 0, "\(python.transcript.suffix(2_000))")
        let lines = python.stdoutLines.filter { !$0.isEmpty }
        #expect(lines.count == Self.cases)
        var kinds: [String: Int] = [:]
        var reassembler = Reassembler()
        for line in lines {
            let json = try JSONParser().parse(line)
            let kind = try #require(json["kind"]?.stringValue)
            let frames = try (json["frames"]?.arrayValue ?? []).map { try Hex.decode($0.stringValue ?? "") }
            var packet: MeshPacket?
            if kind == "fragments" {
                #expect(frames.count > 1)
                for frame in frames {
                    let carrier = try MeshPacket.decode(frame)
                    #expect(carrier.type == .fragment && carrier.signature == nil)
                    let fragment = try FragmentPayload.decode(carrier.payload)
                    if case .complete(let inner) = reassembler.add(fragment, from: carrier.sender, trusted: false, now: carrier.timestamp) {
                        packet = try MeshPacket.decode(inner)
                    }
                }
            } else {
                #expect(frames.count == 1)
                packet = try MeshPacket.decode(try #require(frames.first))
            }
            let decoded = try #require(packet, "\(kind) case did not decode")
            #expect(decoded.type.rawValue == UInt8(json["type"]?.integerValue ?? -1))
            #expect(decoded.sender.hex == json["sender"]?.stringValue)
            #expect(decoded.recipient?.hex == json["recipient"]?.stringValue)
            #expect(decoded.timestamp == UInt64(json["timestamp"]?.integerValue ?? -1))
            #expect(Hex.encode(decoded.payload) == json["payloadHex"]?.stringValue)
            let key = try Ed25519PublicKey(rawRepresentation: try Hex.decode(json["signingKey"]?.stringValue ?? ""))
            #expect(decoded.verifySignature(key).isValid, "\(kind): signature from bitchat-cli verifies")
            if kind == "announce" {
                let announce = try AnnouncePayload.decode(decoded.payload)
                #expect(announce.nickname == json["nickname"]?.stringValue)
                #expect(MeshPeerID(noisePublicKey: announce.noisePublicKey) == decoded.sender)
                #expect(announce.signingPublicKey == key.rawRepresentation)
            }
            kinds[kind, default: 0] += 1
        }
        #expect(kinds.count == 5 && kinds.values.allSatisfy { $0 >= 100 })
    }

    @Test(.timeLimit(.minutes(2)))
    func packetsWeEncodeDecodeAndVerifyInBitchatCLI() async throws {
        var random = SeededRandom(seed: 20_261_129)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ0123456789.,!?-éüßçñ漢字мир🙂🎉")
        func text(_ range: ClosedRange<Int>) -> String {
            String((0..<Int.random(in: range, using: &random)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
        }
        var lines: [String] = []
        var compressedCount = 0
        let kinds = ["announce", "message", "leave", "fragments", "directed"]
        for index in 0..<Self.cases {
            let noise = X25519PrivateKey.generate()
            let signing = Ed25519PrivateKey.generate()
            let identity = MeshIdentity(noisePublicKey: noise.publicKey, signingKey: signing, nickname: text(1...20),
                                        capabilities: index % 3 == 0 ? [.bridge] : nil, bridgeGeohash: index % 3 == 0 ? "u4pruy" : nil)
            let timestamp = 1_750_000_000_000 + random.next() % 1_000_000_000
            let kind = kinds[index % kinds.count]
            var packet = MeshPacket(type: .message, timestamp: timestamp, sender: identity.peerID, payload: [])
            var members: [(String, JSONValue)] = [("kind", .string(kind)), ("nickname", .string(identity.nickname))]
            switch kind {
            case "announce":
                var engine = MeshPeerEngine(identity: identity)
                let announce = engine.makeAnnounce(now: timestamp)
                packet = try #require(announce)
            case "leave":
                packet.type = .leave
            case "fragments":
                // Half compressible (repetitive) text, half mixed text.
                packet.payload = Array((index % 2 == 0 ? String(repeating: text(5...15), count: 60) : text(500...1200)).utf8)
            case "directed":
                packet.recipient = MeshPeerID(rawValue: random.next())
                packet.payload = Array(text(0...150).utf8)
            default:
                packet.payload = Array((index % 4 == 1 ? String(repeating: "hello mesh ", count: Int.random(in: 10...40, using: &random)) : text(0...150)).utf8)
            }
            if kind != "announce" { packet = try packet.signed(with: signing) }  // announces come signed
            let frame = try packet.encode()
            let compressed = frame[11] & MeshPacket.Flags.isCompressed != 0
            if compressed { compressedCount += 1 }
            var frames = [frame]
            if kind == "fragments" {
                let engine = MeshPeerEngine(identity: identity)
                frames = try #require(engine.fragmentFrames(of: packet, frame: frame, mtu: 185))
            }
            members += [
                ("signingKey", .string(Hex.encode(signing.publicKey.rawRepresentation))), ("sender", .string(packet.sender.hex)),
                ("recipient", packet.recipient.map { .string($0.hex) } ?? .null), ("timestamp", .integer(Int64(timestamp))),
                ("type", .integer(Int64(packet.type.rawValue))), ("payloadHex", .string(Hex.encode(packet.payload))),
                ("compressed", .bool(compressed)), ("frames", .array(frames.map { .string(Hex.encode($0)) })),
            ]
            lines.append(JSONWriter.compact(.object(members)))
        }
        #expect(compressedCount >= 100, "the batch exercises compressed signed frames too")
        let directory = TestEnvironment.temporaryDirectory("bitchat-cli-diff")
        let path = directory + "/cases.jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let python = try ChildProcess(TestEnvironment.venvBinary("python"), [Self.driver, "verify", path], name: "bitchat-cli verify")
        #expect(try await python.waitForExit(timeout: .seconds(90)) == 0, "\(python.transcript.suffix(2_000))")
        let results = python.stdoutLines.filter { !$0.isEmpty }
        #expect(results.count == Self.cases)
        let failures = results.filter { !$0.contains("\"ok\": true") }
        #expect(failures.isEmpty, "bitchat-cli rejected \(failures.count) cases, e.g. \(failures.prefix(3))")
        try? FileManager.default.removeItem(atPath: directory)
    }
}
