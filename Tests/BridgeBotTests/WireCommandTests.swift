import Foundation
import BotSupport
import BridgeTestSupport
import Testing

@Suite("bitchat-bridge wire decode|encode")
struct WireCommandTests {
    /// RFC 8032 test 1 key pair.
    let seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
    let publicKey = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"

    @Test("decode prints MESH-WIRE vector A1 as JSON")
    func decodeVectorA1() async throws {
        let result = try await runBridge(["wire", "decode", "01020701020304050607080000031011121314151617aabbcc", "--compact"])
        #expect(result.status == 0)
        let json = try JSONParser().parse(result.stdout)
        #expect(json["type"]?.stringValue == "message")
        #expect(json["ttl"]?.integerValue == 7)
        #expect(json["timestamp"]?.integerValue == 0x0102030405060708)
        #expect(json["sender"]?.stringValue == "1011121314151617")
        #expect(json["payloadHex"]?.stringValue == "aabbcc")
    }

    @Test("encode signs; decode verifies with --signing-key and names rejections")
    func encodeSignDecodeVerify() async throws {
        let input = #"{"type":"message","timestamp":1750000000123,"sender":"4457134794559182","payload":{"text":"hello mesh"}}"#
        let encoded = try await runBridge(["wire", "encode", input, "--sign-with", seed])
        #expect(encoded.status == 0, "\(encoded.stderr)")
        let hex = encoded.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let decoded = try await runBridge(["wire", "decode", hex, "--signing-key", publicKey, "--compact"])
        let json = try JSONParser().parse(decoded.stdout)
        #expect(json["payload"]?["text"]?.stringValue == "hello mesh")
        #expect(json["signatureValid"]?.boolValue == true)
        // Flip one payload byte: still decodes, no longer verifies.
        var bytes = Array(hex)
        let index = (14 + 8) * 2 + 1
        bytes[index] = bytes[index] == "0" ? "1" : "0"
        let tampered = try await runBridge(["wire", "decode", String(bytes), "--signing-key", publicKey, "--compact"])
        #expect(try JSONParser().parse(tampered.stdout)["signatureValid"]?.boolValue == false)
        let rejected = try await runBridge(["wire", "decode", "ff020701020304050607080000031011121314151617aabbcc"])
        #expect(rejected.status == 1)
        #expect(rejected.stderr.contains("unsupportedVersion"))
    }

    @Test("announce round trip: encode from JSON, decode shows TLVs and verifies against its own key")
    func announceRoundTrip() async throws {
        let noise = String(repeating: "11", count: 32)
        // Peer ID = SHA-256(noise key)[0..8]; the decoder reports whether the sender matches.
        let input = """
            {"type":"announce","sender":"0000000000000000","payload":{"nickname":"bridge","noisePublicKey":"\(noise)",
             "signingPublicKey":"\(publicKey)","capabilities":{"names":["bridge","gateway"]},"bridgeGeohash":"u4pruy"}}
            """
        let encoded = try await runBridge(["wire", "encode", input.replacingOccurrences(of: "\n", with: ""), "--sign-with", seed])
        #expect(encoded.status == 0, "\(encoded.stderr)")
        let decoded = try await runBridge(["wire", "decode", encoded.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "--compact"])
        let json = try JSONParser().parse(decoded.stdout)
        #expect(json["payload"]?["nickname"]?.stringValue == "bridge")
        #expect(json["payload"]?["bridgeGeohash"]?.stringValue == "u4pruy")
        #expect(json["payload"]?["capabilities"]?["raw"]?.integerValue == 0x84)
        #expect(json["payload"]?["peerIDMatches"]?.boolValue == false)
        #expect(json["signatureValid"]?.boolValue == true)
    }

    /// `wire decode … | wire encode -` through a real pipe (a shell runs both commands).
    func pipe(_ decodeArguments: [String], stdin: String? = nil) async throws -> CLIResult {
        let binary = TestEnvironment.bridgeExecutable
        let quoted = decodeArguments.map { "'\($0)'" }.joined(separator: " ")
        let child = try ChildProcess("/bin/bash", ["-c", "set -o pipefail; '\(binary)' wire decode \(quoted) | '\(binary)' wire encode -"])
        if let stdin { child.write(stdin) }
        child.closeStdin()
        let status = try await child.waitForExit(timeout: .seconds(60))
        return CLIResult(status: status, stdout: child.stdoutLines.joined(separator: "\n"), stderr: child.stderrLines.joined(separator: "\n"))
    }

    /// MESH-WIRE §12.1 A1 and A2, a hand-built frame with a raw-DEFLATE stored block (another encoder's
    /// compressed bytes, §12.1 BinaryProtocolTest), and A1 with the flag bits decoders ignore set.
    static let vectors = [
        "01020701020304050607080000031011121314151617aabbcc",
        "021105000000000000002a0b00000002" + "0102030405060708" + "1112131415161718" + "02" + "2122232425262728"
            + "3132333435363738" + "dead" + String(repeating: "5a", count: 64),
        // v1 message, IS_COMPRESSED, payload region = originalSize 0x0078 + stored block (01 0078 ff87) + 120 × 'a'.
        "010207" + "0000000000000001" + "04" + "007f" + "1011121314151617" + "0078" + "01" + "7800" + "87ff"
            + String(repeating: "61", count: 120),
        "0102070102030405060708" + "e8" + "0003" + "1011121314151617" + "aabbcc",
    ]

    @Test("wire decode HEX | wire encode - prints HEX again for the §12.1 vectors and foreign encodings")
    func pipeVectors() async throws {
        for vector in Self.vectors {
            let result = try await pipe([vector])
            #expect(result.status == 0, "\(vector): \(result.stderr)")
            #expect(result.stdout == vector, "\(vector)\n→ \(result.stdout)")
        }
    }

    @Test("decode - | encode - reproduces 300 random packets byte for byte: signed, fragments, carriers, compressed, padded, v2 routes")
    func pipeRandomPackets() async throws {
        var random = SeededRandom(seed: 0x5EED_F00D)
        func hex(_ count: Int) -> String { (0..<count).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &random)) }.joined() }
        let words = ["hello", "mesh", "bridge", "stage", "crowd", "🎶", "ünïcode", "a", "b"]
        var documents: [(json: String, flags: [String])] = []
        for index in 0..<300 {
            let version = index % 5 == 0 ? 2 : 1
            var fields: [String] = [
                "\"version\":\(version)", "\"ttl\":\(Int.random(in: 0...7, using: &random))",
                "\"timestamp\":\(UInt64.random(in: 0...(1 << 53), using: &random))", "\"sender\":\"\(hex(8))\"",
            ]
            if index % 3 == 0 { fields.append("\"recipient\":\"\(hex(8))\"") }
            if version == 2, index % 2 == 0 { fields.append("\"route\":[\"\(hex(8))\",\"\(hex(8))\"]") }
            if index % 7 == 0 { fields.append("\"isRSR\":true") }
            switch index % 6 {
            case 0, 1:
                // Long repetitive texts cross the §2.5 compression threshold.
                let count = index % 2 == 0 ? Int.random(in: 1...8, using: &random) : Int.random(in: 40...400, using: &random)
                let text = (0..<count).map { _ in words.randomElement(using: &random)! }.joined(separator: " ")
                fields += ["\"type\":\"message\"", "\"payload\":{\"text\":\"\(text)\"}"]
            case 2:
                fields += ["\"type\":\"fragment\"", "\"payload\":{\"fragmentID\":\"\(hex(8))\",\"index\":\(index % 4),"
                    + "\"total\":4,\"originalType\":\"message\",\"chunkHex\":\"\(hex(Int.random(in: 1...300, using: &random)))\"}"]
            case 3:
                fields += ["\"type\":\"nostrCarrier\"", "\"payload\":{\"direction\":\"toGateway\",\"geohash\":\"u4pruy\","
                    + "\"event\":\"{\\\"id\\\":\\\"\(hex(32))\\\",\\\"content\\\":\\\"\(String(repeating: "x", count: index))\\\"}\"}"]
            case 4:
                fields += ["\"type\":\"leave\""]
            default:
                fields += ["\"type\":\"0x\(String(format: "%02x", 0x40 + index % 16))\"", "\"payloadHex\":\"\(hex(Int.random(in: 0...200, using: &random)))\""]
            }
            var flags: [String] = []
            if index % 2 == 1 { flags += ["--sign-with", index % 3 == 0 ? seed : String(repeating: "4\(index % 3)", count: 32)] }
            if index % 4 >= 2 { flags.append("--pad") }
            documents.append(("{" + fields.joined(separator: ",") + "}", flags))
        }
        // Encode each packet with its own flags, then pipe all the frames through decode - | encode - at once.
        var frames: [String] = []
        for group in Dictionary(grouping: documents.indices, by: { documents[$0].flags }) {
            let child = try ChildProcess(TestEnvironment.bridgeExecutable, ["wire", "encode", "-"] + group.key)
            child.write(group.value.map { documents[$0].json }.joined(separator: "\n") + "\n")
            child.closeStdin()
            #expect(try await child.waitForExit(timeout: .seconds(60)) == 0, "\(child.transcript)")
            frames += child.stdoutLines.filter { !$0.isEmpty }
        }
        #expect(frames.count == documents.count)
        let result = try await pipe(["-"], stdin: frames.joined(separator: "\n") + "\n")
        #expect(result.status == 0, "\(result.stderr)")
        let back = result.stdout.split(separator: "\n").map(String.init)
        #expect(back.count == frames.count)
        for (sent, received) in zip(frames, back) where sent != received {
            Issue.record("frame changed:\n\(sent)\n\(received)")
        }
        // The random set covers what the title names: compressed and padded frames among them.
        let shapes = try await runBridge(["wire", "decode", "-"], stdin: frames.joined(separator: "\n") + "\n")
        let lines = try shapes.stdout.split(separator: "\n").map { try JSONParser().parse(String($0)) }
        #expect(lines.contains { $0["compressedHex"] != nil } && lines.contains { $0["padded"] == .bool(true) })
        #expect(lines.contains { $0["signature"] != .null } && lines.contains { !($0["route"]?.arrayValue ?? []).isEmpty })
    }

    @Test("encode - reads every JSON document on stdin, pretty or one per line; a cut-off document is named")
    func encodeReadsAllOfStdin() async throws {
        let pretty = try await runBridge(["wire", "decode", "01020701020304050607080000031011121314151617aabbcc"])
        let child = try ChildProcess(TestEnvironment.bridgeExecutable, ["wire", "encode", "-"])
        child.write(pretty.stdout + "\n" + pretty.stdout.replacingOccurrences(of: "\n", with: "") + "\n")
        child.closeStdin()
        #expect(try await child.waitForExit(timeout: .seconds(30)) == 0, "\(child.transcript)")
        #expect(child.stdoutLines.filter { !$0.isEmpty } == Array(repeating: "01020701020304050607080000031011121314151617aabbcc", count: 2))
        let cut = try ChildProcess(TestEnvironment.bridgeExecutable, ["wire", "encode", "-"])
        cut.write(String(pretty.stdout.dropLast(3)))
        cut.closeStdin()
        #expect(try await cut.waitForExit(timeout: .seconds(30)) == 64)
        #expect(cut.stderrLines.joined().contains("cut off"), "\(cut.transcript)")
    }
}
