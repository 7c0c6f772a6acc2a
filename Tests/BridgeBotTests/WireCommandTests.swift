import Foundation
import BotSupport
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
}
