import BitchatWire
import BotCrypto
import BotSupport
import Testing

/// COURIER.md's vectors: the recipient tag (§1.4), the envelope (§1.6, with the Android PR's fixed iOS wire vector)
/// and a signed deposit packet (§6.3).
@Suite("Courier envelope vectors (COURIER.md)")
struct CourierVectorTests {
    static let alice = bytes("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")  // RFC 7748 §6.1

    @Test("§1.4 tags", arguments: [
        ("11", 20_000, "173d54ec4ce3de7b45d355eea6500dde"), ("11", 20_001, "33055c4c2dee565a4a641bd00aa1d691"),
        ("22", 20_000, "664d981a8883942af67dd4c32d3140f2"), ("33", 20_253, "0a5c91d1e318bf1007521923134ed1c5"),
        ("33", 20_254, "4688c0220629c88984a75ea2374f1cdc"), ("33", 20_255, "4330d9c3a7ac5a91324fafcc08367d04"),
        ("11", 0, "ecf22c7df02c77ef5f35dd44847d8029"),
    ])
    func tag(key: String, day: UInt32, expected: String) {
        let noiseKey = bytes(String(repeating: key, count: 32))
        #expect(Hex.encode(CourierTag.tag(noiseKey: noiseKey, day: day)) == expected)
    }

    @Test("§1.4: peer IDs of the vector keys, Alice's tag, and the candidates around 1 750 000 000 (day 20254)")
    func candidates() {
        #expect(MeshPeerID(noisePublicKey: repeated(0x11, 32)).hex == "02d449a31fbb267c")
        #expect(MeshPeerID(noisePublicKey: repeated(0x33, 32)).hex == "deb0e38ced1e41de")
        #expect(MeshPeerID(noisePublicKey: Self.alice).hex == "300c9c9603b92a4b")
        #expect(Hex.encode(CourierTag.tag(noiseKey: Self.alice, day: 20_254)) == "ce4b5e4d7b341218c722cb4553543023")
        #expect(CourierTag.day(unixSeconds: 1_750_000_000) == 20_254)
        #expect(CourierTag.candidates(noiseKey: repeated(0x33, 32), unixSeconds: 1_750_000_000).map(Hex.encode)
            == ["0a5c91d1e318bf1007521923134ed1c5", "4688c0220629c88984a75ea2374f1cdc", "4330d9c3a7ac5a91324fafcc08367d04"])
        // Day 0: day − 1 is day 0 again, as iOS computes it.
        #expect(CourierTag.candidates(noiseKey: repeated(0x11, 32), unixSeconds: 5).first.map(Hex.encode) == "ecf22c7df02c77ef5f35dd44847d8029")
        #expect(CourierTag.day(unixSeconds: -5) == 0)
    }

    static let e1 = bytes("010010173d54ec4ce3de7b45d355eea6500dde020008000001ba60d33800030010000102030405060708090a0b0c0d0e0f04000104")
    static let e1Envelope = CourierEnvelope(
        recipientTag: bytes("173d54ec4ce3de7b45d355eea6500dde"), expiryMs: 1_900_000_000_000, ciphertext: Array(0...15), copies: 4)

    @Test("§1.6 E1, E1c (the relay-drop form) and E2 encode and decode")
    func envelopes() throws {
        #expect(try Self.e1Envelope.encode() == Self.e1)
        #expect(try CourierEnvelope.decode(Self.e1) == Self.e1Envelope)
        let e1c = try Self.e1Envelope.withCopies(1).encode()
        #expect(e1c == Array(Self.e1.prefix(49)))
        #expect(Base64.encode(e1c) == "AQAQFz1U7Ezj3ntF01XuplAN3gIACAAAAbpg0zgAAwAQAAECAwQFBgcICQoLDA0ODw==")
        let e2 = CourierEnvelope(recipientTag: Self.e1Envelope.recipientTag, expiryMs: 1_900_000_000_000, ciphertext: bytes("42424242"), prekeyID: 7)
        let e2Bytes = bytes("010010173d54ec4ce3de7b45d355eea6500dde020008000001ba60d338000300044242424205000400000007")
        #expect(try e2.encode() == e2Bytes)
        #expect(try CourierEnvelope.decode(e2Bytes) == e2)
    }

    @Test("§1.6: the Android PR's fixed iOS wire vector")
    func androidCrossCheck() throws {
        let envelope = CourierEnvelope(
            recipientTag: Array(0...15), expiryMs: 0x0102030405060708, ciphertext: bytes("aabbcc"), copies: 4, prekeyID: 0x11223344)
        #expect(try envelope.encode() == bytes("010010000102030405060708090a0b0c0d0e0f0200080102030405060708030003aabbcc0400010405000411223344"))
    }

    @Test("§1.3: what iOS rejects, with its reason; unknown TLVs skipped; last repeat wins; copies clamped")
    func decodeRules() throws {
        #expect(throws: WireError.tlvOverrun(type: 0x04)) { try CourierEnvelope.decode(Array(Self.e1.dropLast())) }
        #expect(throws: WireError.missingTLV(0x03)) { try CourierEnvelope.decode(Array(Self.e1.prefix(30))) }
        var shortTag = bytes("010008 0011223344556677"); shortTag += Array(Self.e1.dropFirst(19))
        #expect(throws: WireError.invalidLength(field: .recipientTag, length: 8)) { try CourierEnvelope.decode(shortTag) }
        var shortExpiry = Array(Self.e1.prefix(19)); shortExpiry += bytes("020007 00000000000001"); shortExpiry += Array(Self.e1.dropFirst(30))
        #expect(throws: WireError.invalidLength(field: .expiry, length: 7)) { try CourierEnvelope.decode(shortExpiry) }
        #expect(throws: WireError.invalidLength(field: .ciphertext, length: 0)) {
            try CourierEnvelope.decode(Array(Self.e1.prefix(30)) + bytes("030000"))
        }
        #expect(try CourierEnvelope.decode(Self.e1 + bytes("7f0002dead")) == Self.e1Envelope)
        // A repeated tag: the last one wins (iOS); copies 0 and 200 are clamped to 1 and 8.
        let other = repeated(0xAB, 16)
        let repeatedTag = try CourierEnvelope.decode(Self.e1 + bytes("010010") + other)
        #expect(repeatedTag.recipientTag == other)
        #expect(try CourierEnvelope.decode(Array(Self.e1.dropLast()) + [0]).copies == 1)
        #expect(try CourierEnvelope.decode(Array(Self.e1.dropLast()) + [200]).copies == 8)
        // The encoder refuses what it may not write.
        #expect(throws: WireError.invalidLength(field: .ciphertext, length: 16_385)) {
            try CourierEnvelope(recipientTag: repeated(1, 16), expiryMs: 1, ciphertext: repeated(0, 16_385)).encode()
        }
        #expect(throws: WireError.invalidLength(field: .recipientTag, length: 15)) {
            try CourierEnvelope(recipientTag: repeated(1, 15), expiryMs: 1, ciphertext: [1]).encode()
        }
        #expect(CourierEnvelope(recipientTag: [], expiryMs: 0, ciphertext: []).isExpired(nowMs: 0))
        #expect(!Self.e1Envelope.isExpired(nowMs: 1_899_999_999_999) && Self.e1Envelope.isExpired(nowMs: 1_900_000_000_000))
    }

    @Test("§6.3: the signed deposit packet (Ed25519 seed 01×32) is byte-equal and verifies")
    func depositPacket() throws {
        let key = try Ed25519PrivateKey(seed: repeated(0x01, 32))
        #expect(Hex.encode(key.publicKey.rawRepresentation) == "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c")
        let packet = MeshPacket(
            type: .courierEnvelope, ttl: 7, timestamp: 1_750_000_000_123, sender: try MeshPeerID(hex: "9f72ea0cf49536e3"),
            recipient: try MeshPeerID(hex: "deb0e38ced1e41de"), payload: Self.e1)
        let frame = try packet.signed(with: key).encode()
        let expected = bytes("010407000001977420dc7b0300359f72ea0cf49536e3deb0e38ced1e41de") + Self.e1 + bytes(
            "8fb5b9ab464c8dde5645e7c5685aee99ee42b3ab1d0ae8df497ccd334622dc35bc307ee5bbec78a0c1ccb1bee56fc509a47ef941bea0ecdaeabbeeda497b8b03")
        #expect(frame.count == 147)
        #expect(frame == expected)
        let decoded = try MeshPacket.decode(expected)
        #expect(decoded.verifySignature(key.publicKey) == .valid(.asReceived))
        #expect(try CourierEnvelope.decode(decoded.payload) == Self.e1Envelope)
    }
}
