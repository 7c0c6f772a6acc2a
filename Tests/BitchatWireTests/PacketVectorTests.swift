import BitchatWire
import BotCompression
import BotCrypto
import BotSupport
import Testing

@Suite("MESH-WIRE §12.1 packet vectors")
struct PacketVectorTests {
    @Test("A1: v1 message, unsigned, no padding")
    func vectorA1() throws {
        let packet = MeshPacket(
            type: .message, ttl: 7, timestamp: 0x0102030405060708,
            sender: MeshPeerID(bytes: bytes("1011121314151617")), payload: bytes("aabbcc")
        )
        let expected = bytes("01 02 07 0102030405060708 00 0003 1011121314151617 aabbcc")
        #expect(try packet.encode() == expected)
        let decoded = try MeshPacket.decode(expected)
        #expect(decoded == packet)
    }

    @Test("A2: v2 with recipient, route and signature")
    func vectorA2() throws {
        let packet = MeshPacket(
            version: 2, type: .noiseEncrypted, ttl: 5, timestamp: 42,
            sender: MeshPeerID(bytes: bytes("0102030405060708")),
            recipient: MeshPeerID(bytes: bytes("1112131415161718")),
            route: [MeshPeerID(bytes: bytes("2122232425262728")), MeshPeerID(bytes: bytes("3132333435363738"))],
            payload: bytes("dead"), signature: repeated(0x5a, 64)
        )
        let expected =
            bytes(
                "02 11 05 000000000000002a 0b 00000002 0102030405060708 1112131415161718 02 2122232425262728 3132333435363738 dead"
            ) + repeated(0x5a, 64)
        #expect(try packet.encode() == expected)
        #expect(try MeshPacket.decode(expected) == packet)
    }

    @Test("A7: fragment payload")
    func vectorA7() throws {
        let fragment = FragmentPayload(
            fragmentID: 0x0001020304050607, index: 1, total: 3, originalType: .message, chunk: bytes("aabb")
        )
        let expected = bytes("0001020304050607 0001 0003 02 aabb")
        #expect(fragment.encode() == expected)
        #expect(try FragmentPayload.decode(expected) == fragment)
    }

    @Test("A8: request-sync payload, unknown leading TLV ignored")
    func vectorA8() throws {
        let expected = bytes("01 0001 13 02 0004 01020304 03 0002 aabb")
        let request = RequestSyncPayload(p: 19, m: 0x01020304, data: bytes("aabb"))
        #expect(request.encode() == expected)
        #expect(try RequestSyncPayload.decode(expected) == request)
        #expect(try RequestSyncPayload.decode(bytes("7f 0002 cafe") + expected) == request)
    }

    @Test("A9: announce with capabilities and an unknown TLV")
    func vectorA9() throws {
        let announce = AnnouncePayload(
            nickname: "bob", noisePublicKey: repeated(0x11, 32), signingPublicKey: repeated(0x22, 32),
            capabilities: .privateMedia, unknownTLVs: [.init(type: 0x7f, value: bytes("cafe"))]
        )
        let expected =
            bytes("01 03 626f62 02 20") + repeated(0x11, 32) + bytes("03 20") + repeated(0x22, 32)
            + bytes("05 02 0001 7f 02 cafe")
        #expect(try announce.encode() == expected)
        #expect(try AnnouncePayload.decode(expected) == announce)
    }

    @Test("A11: truncations reject with a named reason")
    func vectorA11() throws {
        #expect(throws: WireError.missingTLV(0x03)) { try RequestSyncPayload.decode(bytes("0100011302000401020304")) }
        #expect(throws: WireError.tlvOverrun(type: 0x02)) { try AnnouncePayload.decode(bytes("0103626f62022011")) }
        #expect(throws: WireError.truncated(field: .fragmentHeader, needed: 13, available: 12)) {
            try FragmentPayload.decode(repeated(0, 12))
        }
        // Every prefix of an encoded, signed chat message is rejected.
        let key = Ed25519PrivateKey.generate()
        let frame = try MeshPacket(
            type: .message, timestamp: 1_750_000_000_123, sender: MeshPeerID(rawValue: 0x4457134794559182),
            payload: Array("hello mesh".utf8)
        ).signed(with: key).encode()
        for length in 0..<frame.count {
            #expect(throws: WireError.self) { try MeshPacket.decode(Array(frame.prefix(length))) }
        }
    }

    @Test("V-3 (§4.3 worked example): 256-byte signing pre-image of \"hello mesh\"")
    func signingPreimage() throws {
        let packet = MeshPacket(
            type: .message, ttl: 7, timestamp: 1_750_000_000_123, sender: try MeshPeerID(hex: "4457134794559182"),
            payload: Array("hello mesh".utf8)
        )
        let expected = bytes("01 02 00 0000019774 20dc7b 00 000a 4457134794559182") + Array("hello mesh".utf8)
            + repeated(0xe0, 224)
        #expect(try packet.signingBytes() == expected)
        let key = Ed25519PrivateKey.generate()
        let signed = try packet.signed(with: key)
        #expect(signed.verifySignature(key.publicKey) == .valid(.asReceived))
        var relayed = try MeshPacket.decode(try signed.encode())
        relayed.ttl = 3
        relayed.isRSR = true
        #expect(relayed.verifySignature(key.publicKey).isValid, "TTL and RSR are outside the signature")
        relayed.payload[0] ^= 1
        #expect(relayed.verifySignature(key.publicKey) == .invalid)
    }
}

@Suite("Android BinaryProtocolTest properties (§12.1)")
struct BinaryProtocolPropertyTests {
    let small = MeshPacket(type: .message, timestamp: 1, sender: MeshPeerID(rawValue: 1), payload: Array("hi".utf8))

    @Test func smallPacketPadsTo256AndUnpadsBack() throws {
        let unpadded = try small.encode()
        #expect(unpadded.count == 14 + 8 + 2)
        let padded = try small.encode(padding: true)
        #expect(padded.count == 256)
        #expect(MessagePadding.unpad(padded) == unpadded)
        #expect(try MeshPacket.decode(padded) == small)
    }

    @Test func largeFrameIsNotPaddedAndDecodes() throws {
        var packet = small
        packet.payload = (0..<2100).map { UInt8(truncatingIfNeeded: $0 &* 7919 >> 3) }
        let frame = try packet.encode(padding: true, compression: .none)
        #expect(frame.count == 14 + 8 + 2100)
        #expect(try MeshPacket.decode(frame).payload == packet.payload)
    }

    @Test func signingBytesDecodeToTTLZeroWithoutSignature() throws {
        var packet = small
        packet.signature = repeated(1, 64)
        let decoded = try MeshPacket.decode(try packet.signingBytes())
        #expect(decoded.ttl == 0 && decoded.signature == nil)
    }

    @Test func v1WithRouteFlagDecodesWithoutRoute() throws {
        var frame = try small.encode()
        frame[11] |= 0x08
        #expect(try MeshPacket.decode(frame).route.isEmpty)
    }

    @Test func v2RouteCountZeroMeansNoRoute() throws {
        var packet = small
        packet.version = 2
        var frame = try packet.encode()
        frame[11] |= 0x08
        frame.insert(0, at: 16 + 8)
        #expect(try MeshPacket.decode(frame).route.isEmpty)
    }

    @Test func storedDeflateBlockDecodesAndReencodesByteIdentically() throws {
        let data = Array(String(repeating: "stored block ", count: 10).utf8)  // 130 bytes
        let len = UInt16(data.count)
        let body: [UInt8] = [0x01, UInt8(len & 0xff), UInt8(len >> 8), UInt8(~len & 0xff), UInt8(~len >> 8)] + data
        var frame = bytes("01 02 07 0000000000000001 04")
        frame.appendBigEndianForTest(UInt64(2 + body.count), size: 2)
        frame += repeated(0x33, 8)
        frame.appendBigEndianForTest(UInt64(data.count), size: 2)
        frame += body
        let decoded = try MeshPacket.decode(frame)
        #expect(decoded.payload == data)
        #expect(try decoded.encode() == frame, "the WirePayload invariant: received compressed bytes are reused")
    }

    @Test func zlibWrappedBodiesInflate() throws {
        // zlib header 78 5e (level 5) around a stored block: what Android may send.
        let data = Array(String(repeating: "z", count: 120).utf8)
        let raw = try #require(RawDeflate.compress(data))
        var adler: (UInt32, UInt32) = (1, 0)
        for byte in data { adler.0 = (adler.0 + UInt32(byte)) % 65521; adler.1 = (adler.1 + adler.0) % 65521 }
        let checksum = adler.1 << 16 | adler.0
        var wrapped: [UInt8] = [0x78, 0x5e] + raw
        wrapped.appendBigEndianForTest(UInt64(checksum), size: 4)
        var frame = bytes("01 02 07 0000000000000001 04")
        frame.appendBigEndianForTest(UInt64(2 + wrapped.count), size: 2)
        frame += repeated(0x33, 8)
        frame.appendBigEndianForTest(UInt64(data.count), size: 2)
        frame += wrapped
        #expect(try MeshPacket.decode(frame).payload == data)
    }

    @Test func underOverDeclaredTruncatedAndTrailingStreamsReject() throws {
        let data = Array(String(repeating: "compress-me ", count: 20).utf8)
        let body = try #require(RawDeflate.compress(data))
        func frame(originalSize: Int, body: [UInt8]) -> [UInt8] {
            var out = bytes("01 02 07 0000000000000001 04")
            out.appendBigEndianForTest(UInt64(2 + body.count), size: 2)
            out += repeated(0x33, 8)
            out.appendBigEndianForTest(UInt64(originalSize), size: 2)
            return out + body
        }
        #expect(try MeshPacket.decode(frame(originalSize: data.count, body: body)).payload == data)
        #expect(throws: WireError.self) { try MeshPacket.decode(frame(originalSize: data.count - 1, body: body)) }
        #expect(throws: WireError.self) { try MeshPacket.decode(frame(originalSize: data.count + 1, body: body)) }
        #expect(throws: WireError.inflateFailed) { try MeshPacket.decode(frame(originalSize: data.count, body: Array(body.dropLast(2)))) }
        #expect(throws: WireError.inflateFailed) { try MeshPacket.decode(frame(originalSize: data.count, body: body + [0x00])) }
    }
}

@Suite("iOS BinaryProtocolTests malformed frames (§12.1 a–i) and positive properties")
struct MalformedFrameTests {
    @Test func namedRejections() throws {
        let header = bytes("01 02 07 0000000000000001")
        // (a) payloadLength 0xc1 with only 30 bytes in total
        #expect(throws: WireError.truncated(field: .payload, needed: 0xc1, available: 8)) {
            try MeshPacket.decode(header + bytes("00 00c1") + repeated(0x41, 16))
        }
        // (b) compressed, payloadLength 1, one body byte
        #expect(throws: WireError.compressedBodyMissing) {
            try MeshPacket.decode(header + bytes("04 0001") + repeated(0x42, 8) + [0x01])
        }
        // (c) payloadLength 0xffff with 3 bytes
        #expect(throws: WireError.self) { try MeshPacket.decode(header + bytes("00 ffff") + repeated(0x43, 8) + [1, 2, 3]) }
        // (d) compressed, originalSize 0xffff, one compressed byte: ratio > 50 000
        #expect(throws: WireError.compressionRatioTooHigh) {
            try MeshPacket.decode(header + bytes("04 0003") + repeated(0x44, 8) + bytes("ffff 00"))
        }
        // (e) flags 03, payloadLength 0xfffe, 2 bytes
        #expect(throws: WireError.self) { try MeshPacket.decode(header + bytes("03 fffe") + repeated(0x45, 8) + [1, 2]) }
        // (f) inputs of 0, 1, 5, 10, 12 bytes
        for n in [0, 1, 5, 10, 12] {
            #expect(throws: WireError.self) { try MeshPacket.decode(repeated(0x01, n)) }
        }
        // (g) version 0xff or 99
        for version: UInt8 in [0xff, 99] {
            var frame = header + bytes("00 0001") + repeated(0x46, 8) + [0]
            frame[0] = version
            #expect(throws: WireError.unsupportedVersion(version)) { try MeshPacket.decode(frame) }
        }
        // (h) a valid frame cut 10 bytes short; (i) truncations at 0/5/10/15/20/25
        let valid = try MeshPacket(
            type: .message, timestamp: 9, sender: MeshPeerID(rawValue: 9), payload: Array("hello world, mesh".utf8)
        ).encode()
        #expect(throws: WireError.self) { try MeshPacket.decode(Array(valid.dropLast(10))) }
        for cut in [0, 5, 10, 15, 20, 25] {
            #expect(throws: WireError.self) { try MeshPacket.decode(Array(valid.prefix(cut))) }
        }
    }

    @Test func payloadLengthCap() throws {
        var frame = bytes("02 02 07 0000000000000001 00")
        frame.appendBigEndianForTest(UInt64(MeshPacket.Limits.maxPayloadLength + 1), size: 4)
        frame += repeated(0, 8)
        #expect(throws: WireError.payloadTooLarge(MeshPacket.Limits.maxPayloadLength + 1)) { try MeshPacket.decode(frame) }
        // n = the cap itself passes the length check and fails only on the missing bytes.
        frame[12...15] = [0x00, 0x12, 0x00, 0x70]
        #expect(throws: WireError.truncated(field: .payload, needed: 1_179_760, available: 0)) {
            try MeshPacket.decode(frame)
        }
    }

    @Test func routeProperties() throws {
        let hop = MeshPeerID(bytes: bytes("aabbcc"))
        #expect(hop.bytes == bytes("aabbcc0000000000"), "a 3-byte hop is zero-padded to 8")
        var packet = MeshPacket(
            version: 2, type: .message, timestamp: 5, sender: MeshPeerID(rawValue: 5),
            recipient: MeshPeerID(rawValue: 6), route: [hop], payload: Array("x".utf8)
        )
        let v2 = try packet.encode()
        #expect(try MeshPacket.decode(v2) == packet)
        packet.version = 1
        let v1 = try packet.encode()
        #expect(v1[11] & MeshPacket.Flags.hasRoute == 0, "v1 never sets HAS_ROUTE")
        #expect(v2.count - v1.count == 11)
    }

    @Test func compressMeV2WithRouteRoundTrips() throws {
        let text = Array(String(repeating: "compress-me", count: 150).utf8)
        let packet = MeshPacket(
            version: 2, type: .message, timestamp: 5, sender: MeshPeerID(rawValue: 5),
            recipient: MeshPeerID(rawValue: 6), route: [MeshPeerID(rawValue: 7)], payload: text
        )
        let frame = try packet.encode()
        #expect(frame[11] & MeshPacket.Flags.isCompressed != 0)
        #expect(frame.count < text.count)
        #expect(try MeshPacket.decode(frame).payload == text)
    }

    @Test(arguments: [(5, 256), (300, 512), (800, 1024), (1900, 2048)])
    func paddedSizesLandOnBuckets(payloadSize: Int, bucket: Int) throws {
        let packet = MeshPacket(
            type: .noiseEncrypted, timestamp: 5, sender: MeshPeerID(rawValue: 5),
            payload: (0..<payloadSize).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 3) }
        )
        #expect(try packet.encode(padding: true, compression: .none).count == bucket)
    }

    @Test func paddingBoundary() throws {
        // 2032 + 16 = 2048 still pads (pad 16); 2033 does not fit any bucket.
        #expect(MessagePadding.pad(repeated(1, 2032)).count == 2048)
        #expect(MessagePadding.pad(repeated(1, 2033)).count == 2033)
        // 240 + 16 = 256 → pad 16; 241 → 512, pad 271 > 255 → unpadded.
        #expect(MessagePadding.pad(repeated(1, 240)).count == 256)
        #expect(MessagePadding.pad(repeated(1, 241)).count == 241)
    }

    @Test func compressionThresholdBoundary() {
        let n99 = Array(String(repeating: "a", count: 99).utf8)
        let n100 = Array(String(repeating: "a", count: 100).utf8)
        #expect(MeshPacket.compressIfWorthwhile(n99, version: 1) == nil)
        #expect(MeshPacket.compressIfWorthwhile(n100, version: 1) != nil)
        // 120 bytes with ≥ 90 % distinct values never compress (test 2).
        let distinct = (0..<120).map { UInt8($0) }
        #expect(MeshPacket.compressIfWorthwhile(distinct, version: 1) == nil)
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndianForTest(_ value: UInt64, size: Int) {
        for i in (0..<size).reversed() { append(UInt8(truncatingIfNeeded: value >> UInt64(8 * i))) }
    }
}
