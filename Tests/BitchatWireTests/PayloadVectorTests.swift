import BitchatWire
import BotSupport
import Testing

@Suite("Capabilities and announce vectors (§12.1 IdentityAnnouncementTest, PeerCapabilitiesTests, PacketsTests)")
struct AnnounceVectorTests {
    @Test func capabilityEncodings() {
        #expect(PeerCapabilities(rawValue: 0x7FF).encoded == bytes("ff 07"))
        #expect(PeerCapabilities().encoded == bytes("00"))
        #expect(PeerCapabilities.prekeys.encoded == bytes("01"))
        #expect(PeerCapabilities.privateMedia.encoded == bytes("00 01"))
        #expect(PeerCapabilities.meshDiagnostics.encoded == bytes("40"))
        #expect(PeerCapabilities.privateMediaReceipts.encoded == bytes("00 02"))
        #expect(PeerCapabilities.nonDestructiveNoiseReplacement.encoded == bytes("00 04"))
        #expect(PeerCapabilities(rawValue: 1 << 11).encoded == bytes("00 08"))
        #expect(PeerCapabilities([.bridge, .gateway]).encoded == bytes("84"))
    }

    @Test func capabilityDecodings() {
        let nine = PeerCapabilities(encoded: bytes("01 00 00 00 00 00 00 80 55"))
        #expect(nine.rawValue == 0x8000_0000_0000_0001)
        #expect(nine.encoded == bytes("01 00 00 00 00 00 00 80"))
        #expect(PeerCapabilities(encoded: bytes("ff ff")).contains(.gateway))
        #expect(PeerCapabilities(encoded: bytes("ff ff")).rawValue == 0xFFFF)
        #expect(PeerCapabilities(encoded: bytes("01 00 00 00 00 00 00 00 aa bb")) == .prekeys)
        #expect(PeerCapabilities(encoded: []) == [])
    }

    let base = bytes("01 03 626f62 02 20") + repeated(0x11, 32) + bytes("03 20") + repeated(0x22, 32)

    @Test func legacyAndPresentEmptyCapabilities() throws {
        #expect(try AnnouncePayload.decode(base).capabilities == nil)
        #expect(try AnnouncePayload.decode(base + bytes("05 00")).capabilities == [])
        let withUnknown = try AnnouncePayload.decode(base + bytes("05 02 00 81 7f 03 010203"))
        #expect(withUnknown.capabilities?.rawValue == 0x8100)
        #expect(try withUnknown.encode() == base + bytes("05 02 00 81 7f 03 010203"))
        #expect(try AnnouncePayload.decode(base + bytes("05 02 80 01")).capabilities?.rawValue == 0x0180)
    }

    @Test func neighbours() throws {
        var announce = try AnnouncePayload.decode(base)
        announce.directNeighbors = (1...12).map { MeshPeerID(rawValue: UInt64($0)) }
        let encoded = try announce.encode()
        #expect(try AnnouncePayload.decode(encoded).directNeighbors.count == 10)
        #expect(try AnnouncePayload.decode(base + bytes("04 07") + repeated(1, 7)).directNeighbors.isEmpty)
    }

    @Test func rejections() throws {
        #expect(throws: WireError.missingTLV(0x03)) { try AnnouncePayload.decode(Array(base.prefix(2 + 3 + 2 + 32))) }
        #expect(throws: WireError.tlvOverrun(type: 0x03)) { try AnnouncePayload.decode(Array(base.dropLast())) }
        #expect(throws: WireError.invalidUTF8(field: .nickname)) {
            try AnnouncePayload.decode(bytes("01 02 c328") + Array(base.dropFirst(5)))
        }
        var long = try AnnouncePayload.decode(base)
        long.nickname = String(repeating: "n", count: 256)
        #expect(throws: WireError.invalidLength(field: .nickname, length: 256)) { try long.encode() }
        long.nickname = String(repeating: "n", count: 255)
        #expect(try AnnouncePayload.decode(try long.encode()).nickname.count == 255)
        // A trailing lone type byte is ignored.
        #expect(try AnnouncePayload.decode(base + [0x09]).nickname == "bob")
    }

    @Test("BridgeWireFormatTests: bridge cell u4pruy + caps [bridge, gateway] round-trips; 13-char cell omitted")
    func bridgeCell() throws {
        var announce = try AnnouncePayload.decode(base)
        announce.capabilities = [.bridge, .gateway]
        announce.bridgeGeohash = "u4pruy"
        let encoded = try announce.encode()
        #expect(encoded.suffix(12) == ArraySlice(bytes("05 01 84 06 06") + Array("u4pruy".utf8)) || encoded.suffix(11) == ArraySlice(bytes("05 01 84 06 06") + Array("u4pruy".utf8)))
        #expect(try AnnouncePayload.decode(encoded) == announce)
        announce.bridgeGeohash = "u4pruydqqvj8p"
        #expect(try AnnouncePayload.decode(try announce.encode()).bridgeGeohash == nil)
    }
}

@Suite("Carrier, sync and identity vectors (§12.1 NostrCarrierPacketTests, Sync, BridgeWireFormatTests)")
struct CarrierSyncIdentityVectorTests {
    @Test("NOSTR-GEO §8.8 example header and BridgeWireFormatTests carrier round trip")
    func carrierExample() throws {
        let carrier = NostrCarrierPayload(direction: .toBridge, geohash: "u4pruy", eventJSON: Array(#"{"id":"x"}"#.utf8))
        #expect(Hex.encode(try carrier.encode()) == "0100010302000675347072757903000a7b226964223a2278227d")
        #expect(try NostrCarrierPayload.decode(try carrier.encode()) == carrier)
        var down = carrier
        down.direction = .fromBridge
        #expect(try NostrCarrierPayload.decode(try down.encode()) == down)
    }

    @Test func carrierRejections() throws {
        var oversized = bytes("01 0001 01 02 0006") + Array("u4pruy".utf8) + bytes("03 4001")
        oversized += repeated(0x41, 16_385)
        #expect(throws: WireError.invalidLength(field: .eventJSON, length: 16_385)) { try NostrCarrierPayload.decode(oversized) }
        #expect(throws: WireError.missingTLV(0x02)) { try NostrCarrierPayload.decode(bytes("01 0001 01")) }
        #expect(throws: WireError.invalidValue(field: .direction, value: 0x77)) { try NostrCarrierPayload.decode(bytes("01 0001 77")) }
        let good = try NostrCarrierPayload(direction: .fromGateway, geohash: "u4pruydqqvj8", eventJSON: Array("{}".utf8)).encode()
        #expect(try NostrCarrierPayload.decode(good + bytes("7f 0002 dead")).geohash == "u4pruydqqvj8")
        #expect(throws: WireError.trailingBytes(2)) { try NostrCarrierPayload.decode(good + bytes("7f 00")) }
        #expect(throws: WireError.invalidLength(field: .geohash, length: 13)) {
            try NostrCarrierPayload(direction: .fromGateway, geohash: "u4pruydqqvj8p", eventJSON: [0x7b]).encode()
        }
        #expect(throws: WireError.invalidLength(field: .geohash, length: 0)) {
            try NostrCarrierPayload(direction: .fromGateway, geohash: "", eventJSON: [0x7b]).encode()
        }
        // 16 384 bytes (n) pass, 16 385 (n + 1) fail.
        #expect(try NostrCarrierPayload(direction: .toBridge, geohash: "u4", eventJSON: repeated(0x41, 16_384)).encode().count > 16_384)
    }

    @Test("Sync type flags: 03, 03 04, 00 01; 00 f8 → none; 00 f9 → board; 03 f8 → announce+message")
    func syncTypeFlags() throws {
        let base = bytes("01 0001 13 02 0004 01020304 03 0002 aabb")
        func types(_ hex: String) throws -> UInt64? {
            let value = bytes(hex)
            return try RequestSyncPayload.decode(base + [0x04, 0x00, UInt8(value.count)] + value).types
        }
        #expect(try types("00 f8") == 0)
        #expect(try types("00 f9") == 0x100)
        #expect(try types("03 f8") == 0x03)
        func encodedTypes(_ raw: UInt64) -> [UInt8] {
            Array(RequestSyncPayload(p: 1, m: 1, data: [], types: raw).encode().suffix(raw > 0xFF ? 2 : 1))
        }
        #expect(encodedTypes(0x03) == bytes("03"))
        #expect(encodedTypes(0x403) == bytes("03 04"))
        #expect(encodedTypes(0x100) == bytes("00 01"))
        #expect(encodedTypes(RequestSyncPayload.Limits.knownTypeBits) == bytes("ff 07"))
    }

    @Test("BridgeWireFormatTests: ms truncation of 1000.9996 s is 1 000 999")
    func timestampTruncation() {
        #expect(MeshPacket.timestampMs(fromSeconds: 1000.9996) == 1_000_999)
    }

    @Test func syncVectors() throws {
        let base = bytes("01 0001 13 02 0004 01020304 03 0002 aabb")
        #expect(try RequestSyncPayload.decode(base + bytes("04 0001 03")).types == 0x03)
        #expect(throws: WireError.invalidValue(field: .syncP, value: 200)) {
            try RequestSyncPayload.decode(bytes("01 0001 c8 02 0004 01020304 03 0000"))
        }
        #expect(try RequestSyncPayload.decode(bytes("01 0001 08 02 0004 00001000 03 0002 0102")).m == 4096)
        // Fragment-ID filter: malformed tokens dropped; 100 IDs capped at 60; 1 025-byte TLV ignored.
        let filter = Array("zzzz,0011,0011223344556677,".utf8)
        let withFilter = base + [0x06, 0x00, UInt8(filter.count)] + filter
        #expect(try RequestSyncPayload.decode(withFilter).fragmentIDs == [0x0011223344556677])
        let many = (0..<100).map { UInt64($0) }
        let encoded = RequestSyncPayload(p: 7, m: 1, data: [], fragmentIDs: many).encode()
        #expect(encoded.count == 4 + 7 + 3 + 3 + 1019, "100 IDs cap at 60 → 1 019 bytes")
        #expect(try RequestSyncPayload.decode(encoded).fragmentIDs == Array(many.prefix(60)))
        let huge = repeated(0x30, 1025)
        #expect(try RequestSyncPayload.decode(base + bytes("06 0401") + huge).fragmentIDs.isEmpty)
        #expect(throws: WireError.invalidLength(field: .syncData, length: 1025)) {
            try RequestSyncPayload.decode(bytes("01 0001 13 02 0004 01020304 03 0401") + huge)
        }
    }

    @Test("BridgeWireFormatTests stableID b83f94d8…")
    func stableID() {
        let id = MeshMessageIdentity.stableID(senderHex: "0011223344556677", timestampMs: 1_750_000_000_123, content: "hello mesh")
        #expect(id == "b83f94d81dcdd1b0c0048f6645995dd4")
        #expect(MeshMessageIdentity.stableID(senderHex: "0011223344556677".uppercased(), timestampMs: 1_750_000_000_123, content: "hello mesh") == id)
        #expect(MeshMessageIdentity.stableID(senderHex: "0011223344556677", timestampMs: 1_750_000_000_123, content: "  hello mesh \n") == id)
    }

    @Test("iOS dedup key format <sender>-1234-2-<hex(sha256(payload))[0..8]>")
    func dedupKey() {
        let packet = MeshPacket(type: .message, timestamp: 1234, sender: MeshPeerID(rawValue: 0x0011223344556677), payload: Array("x".utf8))
        // sha256("x") = 2d711642…
        #expect(MeshMessageIdentity.dedupKey(packet) == "0011223344556677-1234-2-2d711642")
    }
}
