import BitchatWire
import BotSupport
import Testing

@Suite("MESH-WIRE §12.1 vectors for payloads the bridge only decodes (A3–A6, A10, AnnounceV2, rotation, ping, GCS)")
struct OtherPayloadVectorTests {
    @Test("A3: BitchatMessage{id, sender, content, ts}")
    func vectorA3() throws {
        let message = BitchatMessagePayload(timestamp: 0x0102030405060708, id: "id", sender: "bob", content: "hi")
        let expected = bytes("00 0102030405060708 02 6964 03 626f62 0002 6869")
        #expect(try message.encode() == expected)
        #expect(try BitchatMessagePayload.decode(expected) == message)
        // A11: every prefix of an encoded chat message is rejected.
        for length in 0..<expected.count {
            #expect(throws: WireError.self) { try BitchatMessagePayload.decode(Array(expected.prefix(length))) }
        }
    }

    @Test("A4: BitchatMessage with every optional field (Android layout)")
    func vectorA4() throws {
        let message = BitchatMessagePayload(
            flags: 0x01 | 0x02, timestamp: 42, id: "m", sender: "é", content: "hello", originalSender: "o",
            recipientNickname: "r", senderPeerID: "p", mentions: ["a", "β"], channel: "c"
        )
        let expected = bytes("7f 000000000000002a 01 6d 02 c3a9 0005 68656c6c6f 01 6f 01 72 01 70 02 01 61 02 ceb2 01 63")
        #expect(try message.encode(layout: .android) == expected)
        #expect(try BitchatMessagePayload.decode(expected, layout: .android) == message)
    }

    @Test("A5/A6: private message TLV, Noise payload wrapping, legacy file type 0x09 → 0x20")
    func vectorsA5A6() throws {
        let pm = PrivateMessagePayload(messageID: "m1", content: "hi")
        #expect(try pm.encode() == bytes("00 02 6d31 01 02 6869"))
        #expect(NoisePayload(type: 0x01, data: try pm.encode()).encode() == bytes("01 00026d3101026869"))
        #expect(try PrivateMessagePayload.decode(bytes("00026d3101026869")) == pm)
        let legacy = try NoisePayload.decode(bytes("09 cafe"))
        #expect(legacy.type == NoisePayload.Kind.privateFile.rawValue)
        #expect(legacy.encode() == bytes("20 cafe"))
        // A11
        #expect(throws: WireError.missingTLV(0x01)) { try PrivateMessagePayload.decode(bytes("00026d31")) }
        #expect(throws: WireError.tlvOverrun(type: 0x01)) { try PrivateMessagePayload.decode(bytes("00026d3101036869")) }
    }

    @Test("A10: file packet TLV; truncated content rejects")
    func vectorA10() throws {
        let file = FilePacketPayload(name: "a", size: 2, mimeType: "m", content: bytes("dead"))
        let expected = bytes("01 0001 61 02 0004 00000002 03 0001 6d 04 00000002 dead")
        #expect(file.encode() == expected)
        #expect(try FilePacketPayload.decode(expected) == file)
        #expect(throws: WireError.self) { try FilePacketPayload.decode(bytes("010001610400000002de")) }
    }

    @Test("MeshPingPayloadTests: 9 bytes, trailing tolerated, 8 rejected; hops")
    func ping() throws {
        let ping = PingPayload(nonce: 0x0102030405060708, originTTL: 7)
        #expect(ping.encode().count == 9)
        #expect(try PingPayload.decode(ping.encode() + [0xff]) == ping)
        #expect(throws: WireError.self) { try PingPayload.decode(Array(ping.encode().prefix(8))) }
        #expect(ping.hops(receivedTTL: 5) == 3)
    }

    @Test("AnnounceV2PacketTests")
    func announceV2() throws {
        let tags = repeated(0x5a, 64)
        let packet = AnnounceV2Payload(epoch: 0x01020304, tagBlock: tags)
        let encoded = try packet.encode()
        #expect(encoded.prefix(6) == ArraySlice(bytes("01 04 01 02 03 04")))
        #expect(MessageType.announceV2.rawValue == 0x2C)
        #expect(try AnnounceV2Payload.decode(encoded + bytes("7f 03 010203")) == packet)
        let tagTLV = bytes("02 40") + tags
        for rejected in [
            bytes("03 01 01"), bytes("01 04 00000064"), [], bytes("01 04 0000"), bytes("01"), bytes("01 02 0064") + tagTLV,
            bytes("01 04 00000064 02 3f") + repeated(0, 63), bytes("01 04 00000064") + tagTLV + bytes("03 03 800000"),
        ] {
            #expect(throws: WireError.self) { try AnnounceV2Payload.decode(rejected) }
        }
        for count in [63, 65, 0] {
            #expect(throws: WireError.self) { try AnnounceV2Payload(epoch: 1, tagBlock: repeated(0, count)).encode() }
        }
        #expect(throws: WireError.self) { try AnnounceV2Payload(epoch: 1, tagBlock: tags, bridgeGeohash: "u4pruydqqvj8p").encode() }
    }

    @Test("PeerIDRotationTests (reproduced in Python in the spec)")
    func rotation() throws {
        let ikm = (1...32).map { UInt8($0) }
        let secret = try PeerIDRotation.rotationSecret(noisePrivateKey: ikm)
        #expect(Hex.encode(secret) == "fb82dfec0c0a2a4677beca44e2f72c80e7c5de773dd5fce6ee47af83d3c25f09")
        #expect(PeerIDRotation.rotatingID(secret: secret, epoch: 100).hex == "f7c08c528506a374")
        let tag = try PeerIDRotation.recognitionTag(
            sharedSecret: repeated(0x42, 32), epoch: 100, senderPublicKey: repeated(0x0a, 32),
            recipientPublicKey: repeated(0x0b, 32), peerID: MeshPeerID(bytes: repeated(0xa1, 8))
        )
        #expect(Hex.encode(tag) == "4568f61d61d6cbfb")
        #expect(PeerIDRotation.epoch(unixSeconds: 1_784_000_000) == 495_555)
    }

    @Test("GCSFilterTests: P 0/−1/33/255 and M 0/1 decode to empty; P 8 / M 4096 / 0102 accepted; round trip")
    func gcs() throws {
        for p in [0, -1, 33, 255] { #expect(GCSFilter.decode(p: p, m: 4096, data: [0xff, 0x00]).isEmpty) }
        for m: UInt64 in [0, 1] { #expect(GCSFilter.decode(p: 8, m: m, data: [0x01, 0x02]).isEmpty) }
        #expect(!GCSFilter.decode(p: 8, m: 4096, data: bytes("0102")).isEmpty)
        #expect(throws: WireError.invalidValue(field: .syncP, value: 200)) {
            try RequestSyncPayload.decode(bytes("01 0001 c8 02 0004 00001000 03 0002 0102"))
        }
        let values: [UInt64] = [1, 5, 300, 301, 4000, 90_000]
        #expect(GCSFilter.decode(p: 7, m: 100_000, data: GCSFilter.encode(p: 7, values: values)) == values)
    }
}
