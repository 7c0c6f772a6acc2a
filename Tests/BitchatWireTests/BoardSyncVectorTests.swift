import BitchatWire
import BotCrypto
import BotSupport
import Testing

/// BOARD.md §12 vectors (V-B1…V-B6, S1…S8 and the negative vectors), computed by the spec's independent
/// Python reference from the inputs of the upstream tests it names.
@Suite("BOARD.md §12: board payload, REQUEST_SYNC and GCS vectors")
struct BoardSyncVectorTests {
    static let seed = Array(UInt8(0)...31)
    static let postID = Array(UInt8(1)...16)
    static let createdAt: UInt64 = 1_700_000_000_000
    static let key = try! Ed25519PrivateKey(seed: seed)
    static let vb1Signature = bytes(
        "8a693514b9c382dc9cd2c53ff344d5d0cf19d024addeccb393c44760989c465e5e8b3d33b035ff4e3a67264c2e0bcd933b95c7c211f635a6102ea29c59d86601")
    static let vb1 = bytes(
        "010001010200100102030405060708090a0b0c0d0e0f1003000675333364633104000f77617465722061742067617465203205002003a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8060005616c6963650700080000018bcfe568000800080000018bd50bc400090001010a0040"
    ) + vb1Signature

    static func post(_ geohash: String, _ content: String, _ nick: String, flags: UInt8, id: [UInt8] = postID) throws -> BoardPost {
        try BoardPost.signed(
            postID: id, geohash: geohash, content: content, nickname: nick, createdAt: createdAt,
            expiresAt: createdAt + 86_400_000, flags: flags, key: key)
    }

    @Test("V-B1: geohash post — signing bytes, deterministic signature, 186-byte payload, urgent peek")
    func vb1() throws {
        #expect(Hex.encode(Self.key.publicKey.rawRepresentation) == "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8")
        let post = try Self.post("u33dc1", "water at gate 2", "alice", flags: 1)
        #expect(post.signingBytes == bytes(
            "10626974636861742d626f6172642d7631 0102030405060708090a0b0c0d0e0f10 0006 753333646331 000f 77617465722061742067617465203203a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8 0005 616c696365 0000018bcfe56800 0000018bd50bc400 01"))
        #expect(post.signature == Self.vb1Signature)
        #expect(BoardPayload.post(post).encode() == Self.vb1)
        #expect(Self.vb1.count == 186)
        let decoded = try BoardPayload.decode(Self.vb1)
        #expect(decoded == .post(post))
        #expect(decoded.isSignatureValid)
        #expect(BoardPayload.urgentFlag(in: Self.vb1))
        // A flipped content byte still decodes but no longer verifies.
        var tampered = Self.vb1
        tampered[40] ^= 0x01
        #expect(try !BoardPayload.decode(tampered).isSignatureValid)
    }

    @Test("V-B2: tombstone — signing bytes, 136-byte payload, urgent peek false")
    func vb2() throws {
        let tombstone = try BoardTombstone.signed(postID: Self.postID, deletedAt: 1_700_000_100_000, key: Self.key)
        #expect(tombstone.signingBytes == bytes("14626974636861742d626f6172642d64656c2d76310102030405060708090a0b0c0d0e0f100000018bcfe6eea0"))
        let expected = bytes(
            "010001020200100102030405060708090a0b0c0d0e0f1005002003a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b80b00080000018bcfe6eea00a004077a6c6bbc1db5d71925ef5c6700b696ea249c194f65a89378d15efb9d34b1fbeb98db1e0a2ad585b55ef93041b2bf7551744a195b60ae04378847dc06f44eb00")
        #expect(BoardPayload.tombstone(tombstone).encode() == expected)
        #expect(expected.count == 136)
        #expect(try BoardPayload.decode(expected) == .tombstone(tombstone))
        #expect(try BoardPayload.decode(expected).isSignatureValid)
        #expect(!BoardPayload.urgentFlag(in: expected))
    }

    @Test("V-B3: canonical signing bytes verify, but decode rejects the > 7 d lifetime")
    func vb3() throws {
        let post = try BoardPost.signed(
            postID: Self.postID, geohash: "u4", content: "hi", nickname: "n", createdAt: 0x0102030405060708,
            expiresAt: 0x1112131415161718, flags: 1, key: Self.key)
        #expect(post.signingBytes == bytes(
            "10626974636861742d626f6172642d76310102030405060708090a0b0c0d0e0f10000275340002686903a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b800016e0102030405060708111213141516171801"))
        #expect(post.isSignatureValid)
        #expect(throws: WireError.invalidValue(field: .lifetime, value: 0)) { try BoardPayload.decode(BoardPayload.post(post).encode()) }
    }

    @Test("V-B4 mesh-local post and V-B5 iOS-test-shaped post")
    func vb4vb5() throws {
        let vb4 = try Self.post("", "mesh notice", "alice", flags: 0)
        #expect(BoardPayload.post(vb4).encode() == bytes(
            "010001010200100102030405060708090a0b0c0d0e0f1003000004000b6d657368206e6f7469636505002003a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8060005616c6963650700080000018bcfe568000800080000018bd50bc400090001000a004085b6779e9327d507dce257db6f4d86da67da5e9b7f6585e47c8234b870d8d4a0b7beb5973ee45d3125c4d8022e4c67b48d8d0c7b54de7649d6a4970c8caec206"))
        let vb5 = try Self.post("9q8yy", "water point at the north gate", "ranger", flags: 0, id: Array(UInt8(0)...15))
        #expect(BoardPayload.post(vb5).encode() == bytes(
            "01000101020010000102030405060708090a0b0c0d0e0f030005397138797904001d776174657220706f696e7420617420746865206e6f727468206761746505002003a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b806000672616e6765720700080000018bcfe568000800080000018bd50bc400090001000a004095abd265edc492ef6e5a6b4b935f97b1f6d14af380db41d0d153a2cd21ab9923ed2cc75bab5c0d1e73ffc805a904a69065ef1a1b8164c7d102000abce51b1705"))
    }

    /// V-B1 with TLV `type` replaced by `value` (the TLV's position is kept).
    static func replacing(_ type: UInt8, with value: [UInt8]?) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        let src = vb1
        while i + 3 <= src.count {
            let t = src[i]
            let length = Int(src[i + 1]) << 8 | Int(src[i + 2])
            let v = Array(src[(i + 3)..<(i + 3 + length)])
            if t == type {
                if let value { out += [t, UInt8(value.count >> 8), UInt8(value.count & 0xff)] + value }
            } else {
                out += [t, src[i + 1], src[i + 2]] + v
            }
            i += 3 + length
        }
        return out
    }

    @Test("Negative vectors: each one-TLV change of V-B1 rejects with a named reason; the fine edges pass")
    func negatives() throws {
        func u64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> UInt64(56 - 8 * $0)) } }
        let rejected: [(String, [UInt8], WireError)] = [
            ("postID 15", Self.replacing(0x02, with: repeated(1, 15)), .invalidLength(field: .postID, length: 15)),
            ("geohash u33dio", Self.replacing(0x03, with: Array("u33dio".utf8)), .invalidValue(field: .boardGeohash, value: 6)),
            ("geohash 9q8yA", Self.replacing(0x03, with: Array("9q8yA".utf8)), .invalidValue(field: .boardGeohash, value: 5)),
            ("geohash 13", Self.replacing(0x03, with: repeated(0x30, 13)), .invalidLength(field: .boardGeohash, length: 13)),
            ("content empty", Self.replacing(0x04, with: []), .invalidLength(field: .content, length: 0)),
            ("content 513", Self.replacing(0x04, with: repeated(0x41, 513)), .invalidLength(field: .content, length: 513)),
            ("content ff", Self.replacing(0x04, with: [0xff]), .missingTLV(0x04)),
            ("nickname 65", Self.replacing(0x06, with: repeated(0x41, 65)), .invalidLength(field: .authorNickname, length: 65)),
            ("expiresAt = createdAt", Self.replacing(0x08, with: u64(Self.createdAt)), .invalidValue(field: .lifetime, value: 0)),
            ("7 d + 1 ms", Self.replacing(0x08, with: u64(Self.createdAt + 604_800_001)), .invalidValue(field: .lifetime, value: 0)),
            ("createdAt 7 bytes", Self.replacing(0x07, with: repeated(0, 7)), .missingTLV(0x07)),
            ("kind 03", Self.replacing(0x01, with: [0x03]), .missingTLV(0x01)),
            ("flags 2 bytes", Self.replacing(0x09, with: [0, 1]), .invalidLength(field: .boardFlags, length: 2)),
            ("signature 63", Self.replacing(0x0A, with: repeated(0, 63)), .invalidLength(field: .boardSignature, length: 63)),
            ("minus last byte", Array(Self.vb1.dropLast()), .tlvOverrun(type: 0x0A)),
            ("no kind", Self.replacing(0x01, with: nil), .missingTLV(0x01)),
        ]
        for (name, payload, reason) in rejected {
            #expect(throws: reason, "\(name)") { try BoardPayload.decode(payload) }
        }
        let accepted: [(String, [UInt8])] = [
            ("geohash 12", Self.replacing(0x03, with: repeated(0x30, 12))),
            ("content 512", Self.replacing(0x04, with: repeated(0x41, 512))),
            ("nickname 64", Self.replacing(0x06, with: repeated(0x41, 64))),
            ("nickname empty", Self.replacing(0x06, with: [])),
            ("+7 d", Self.replacing(0x08, with: u64(Self.createdAt + 604_800_000))),
            ("+ 7f 0002 dead", Self.vb1 + bytes("7f 0002 dead")),
            ("+ 7f 0003 010203", Self.vb1 + bytes("7f 0003 010203")),
            ("+ 2 trailing bytes", Self.vb1 + bytes("0102")),
        ]
        for (name, payload) in accepted {
            #expect(throws: Never.self, "\(name)") { _ = try BoardPayload.decode(payload) }
        }
        // Two flags TLVs: the peek takes the first, a full decode the last.
        let twoFlags = Self.vb1 + bytes("09 0001 00")
        #expect(BoardPayload.urgentFlag(in: twoFlags))
        guard case .post(let post) = try BoardPayload.decode(twoFlags) else { Issue.record("not a post"); return }
        #expect(!post.isUrgent)
        #expect(!BoardPayload.urgentFlag(in: bytes("09 0005 01")), "an overrun peeks false")
    }

    @Test("V-B6: Android-style outer packet, its packet ID, and a board request that covers it")
    func vb6() throws {
        let sender = MeshPeerID(bytes: SHA256.hash(Self.key.publicKey.rawRepresentation).prefix(8))
        #expect(sender.hex == "56475aa75463474c")
        let packet = MeshPacket(type: .boardPost, ttl: 7, timestamp: Self.createdAt, sender: sender, payload: Self.vb1)
        let frame = try packet.encode(compression: .none)
        #expect(frame == bytes("0123070000018bcfe568000000ba56475aa75463474c") + Self.vb1)
        #expect(frame.count == 208)
        let id = MeshMessageIdentity.packetID(packet)
        #expect(Hex.encode(id) == "be3308695d3b40684448008e005cd522")
        let request = RequestSyncPayload.build(types: .board, candidates: [(id, packet.timestamp)])
        #expect(request.encode() == bytes("01 0001 07 | 02 0004 00000080 | 03 0001 25 | 04 0002 0001".replacingPipes))
        #expect(GCSFilter.decode(p: 7, m: 128, data: [0x25]) == [38])
        #expect(GCSFilter.Membership(request).mightContain(h64: GCSFilter.h64(id)), "a responder holding V-B6 sends nothing")
        // The RSR reply: unchanged but TTL 0 and flag 0x10, also when patched on the frame bytes.
        let reply = try packet.asSyncReply.encode(compression: .none)
        #expect(MeshPacket.syncReplyFrame(frame) == reply)
        #expect(reply[2] == 0 && reply[11] == 0x10)
        let decodedReply = try MeshPacket.decode(reply)
        #expect(decodedReply.isRSR && decodedReply.ttl == 0 && MeshMessageIdentity.packetID(decodedReply) == id)
    }

    @Test("S1/S2/S3: REQUEST_SYNC encodings (Android BoardSyncTest, iOS empty board round, type bits)")
    func requestEncodings() throws {
        let s1 = RequestSyncPayload(p: 7, m: 1234, data: [1, 2, 3], types: SyncTypes.board.rawValue, sinceTimestamp: Self.createdAt)
        let s1Bytes = bytes("01000107 020004000004d2 030003010203 0400020001 0500080000018bcfe56800")
        #expect(s1.encode() == s1Bytes)
        #expect(try RequestSyncPayload.decode(s1Bytes) == s1)
        let s2 = RequestSyncPayload.build(types: .board, candidates: [])
        #expect(s2.encode() == bytes("01000107 02000400000001 030000 0400020001"))
        #expect(SyncTypes.iOSInitialUnion.encoded == bytes("a3 07"))
        #expect(SyncTypes.prekeyBundle.encoded == bytes("00 02"))
        #expect(SyncTypes.fragment.encoded == bytes("20"))
        #expect(SyncTypes.fileTransfer.encoded == bytes("80"))
        #expect(([.announce, .message, .groupMessage] as SyncTypes).encoded == bytes("03 04"))
        #expect(SyncTypes(type: .boardPost) == .board)
        #expect(SyncTypes(type: .ping) == nil)
        // Absent types = announce + message; an empty set means nothing.
        #expect(try RequestSyncPayload.decode(bytes("01000107 02000400000001 030000")).requestedTypes == .publicMessages)
    }

    @Test("BOARD.md §9.1: wrong-length P/M/types/since ignored; P 1…32 and M > 0 required; trailing 1–2 bytes ignored")
    func requestDecoderEdges() throws {
        let base = bytes("01000107 02000400000080 030001 25")
        #expect(throws: WireError.missingTLV(0x01)) { try RequestSyncPayload.decode(bytes("01 0002 0707 02000400000080 030000")) }
        #expect(throws: WireError.missingTLV(0x02)) { try RequestSyncPayload.decode(bytes("01000107 020003 000080 030000")) }
        #expect(throws: WireError.invalidValue(field: .syncP, value: 0)) { try RequestSyncPayload.decode(bytes("01000100 02000400000080 030000")) }
        #expect(throws: WireError.invalidValue(field: .syncP, value: 33)) { try RequestSyncPayload.decode(bytes("01000121 02000400000080 030000")) }
        #expect(try RequestSyncPayload.decode(bytes("01000120 02000400000080 030000")).p == 32)
        #expect(throws: WireError.invalidValue(field: .syncM, value: 0)) { try RequestSyncPayload.decode(bytes("01000107 02000400000000 030000")) }
        // A later M = 0 overwrites; a later wrong-length M does not.
        #expect(try RequestSyncPayload.decode(base + bytes("020002 0000")).m == 128)
        #expect(try RequestSyncPayload.decode(base + bytes("0400090102030405060708 09")).types == nil)
        #expect(try RequestSyncPayload.decode(base + bytes("040000")).types == nil)
        #expect(try RequestSyncPayload.decode(base + bytes("050007 00000000000000")).sinceTimestamp == nil)
        #expect(try RequestSyncPayload.decode(base + bytes("01")) == RequestSyncPayload.decode(base))
        #expect(try RequestSyncPayload.decode(base + bytes("0102")) == RequestSyncPayload.decode(base))
        #expect(throws: WireError.tlvOverrun(type: 0x7f)) { try RequestSyncPayload.decode(base + bytes("7f0001")) }
        // Fragment filter: only the first 60 tokens are looked at; a bad one among them is just dropped.
        let tokens = ["zz"] + (1...60).map { MeshPeerID(rawValue: UInt64($0)).hex }
        let filter = Array(tokens.joined(separator: ",").utf8)
        let decoded = try RequestSyncPayload.decode(base + [0x06, UInt8(filter.count >> 8), UInt8(filter.count & 0xff)] + filter)
        #expect(decoded.fragmentIDs == (1...59).map { UInt64($0) })
        #expect(try RequestSyncPayload.decode(base + bytes("060002 ff00")).fragmentIDs.isEmpty, "not UTF-8: ignored")
    }

    @Test("S4: packet ID of the MESH-WIRE §4.3 'hello mesh' message")
    func s4() {
        let packet = MeshPacket(
            type: .message, timestamp: 1_750_000_000_123, sender: MeshPeerID(rawValue: 0x4457_1347_9455_9182),
            payload: Array("hello mesh".utf8))
        #expect(Hex.encode(MeshMessageIdentity.packetID(packet)) == "5c8c85c29edaf7c67d07cae2b32eff32")
    }

    @Test("S5: Golomb-Rice of [1, 130], P 7 = 00 80 00; M = 130 keeps only [1]; fill bits when P < 7")
    func s5() {
        #expect(GCSFilter.encode(p: 7, values: [1, 130]) == bytes("00 80 00"))
        #expect(GCSFilter.decode(p: 7, m: 131, data: bytes("00 80 00")) == [1, 130])
        #expect(GCSFilter.decode(p: 7, m: 130, data: bytes("00 80 00")) == [1])
        // P 1: the zero fill bits of the last byte decode as phantom deltas of 1 (as iOS does, §9.3).
        #expect(GCSFilter.decode(p: 1, m: 1000, data: GCSFilter.encode(p: 1, values: [1])) == [1, 2, 3, 4])
    }

    @Test("S6: 40 messages at maxBytes 32 → N 28, M 3 584, since = base + 12")
    func s6() {
        let base: UInt64 = 1_750_000_000_000
        let candidates = (0..<40).map { i -> (id: [UInt8], timestamp: UInt64) in
            let packet = MeshPacket(
                type: .message, timestamp: base + UInt64(i), sender: MeshPeerID(rawValue: 0x1122_3344_5566_7788), payload: [UInt8(i)])
            return (MeshMessageIdentity.packetID(packet), packet.timestamp)
        }
        let request = RequestSyncPayload.build(types: .message, candidates: candidates, maxBytes: 32)
        #expect(request.m == 3584)
        #expect(request.sinceTimestamp == base + 12)
        #expect(request.data.count <= 32)
        let membership = GCSFilter.Membership(request)
        for (offset, candidate) in candidates.enumerated() where offset >= 12 {
            #expect(membership.mightContain(h64: GCSFilter.h64(candidate.id)))
        }
    }

    /// `java.util.Random(seed)`: the 48-bit LCG and `nextBytes` (4 bytes per `nextInt`, low byte first).
    struct JavaRandom {
        var state: UInt64
        init(seed: UInt64) { state = (seed ^ 0x5_DEEC_E66D) & ((1 << 48) - 1) }
        mutating func nextInt() -> UInt32 {
            state = (state &* 0x5_DEEC_E66D &+ 0xB) & ((1 << 48) - 1)
            return UInt32(truncatingIfNeeded: state >> 16)
        }
        mutating func nextBytes(_ count: Int) -> [UInt8] {
            var out: [UInt8] = []
            while out.count < count {
                var r = nextInt()
                for _ in 0..<min(4, count - out.count) {
                    out.append(UInt8(truncatingIfNeeded: r))
                    r >>= 8
                }
            }
            return out
        }
    }

    @Test("S7: Android GCSFilterTest — Random(42) IDs ×20 at 400 bytes; ×50 at 20 bytes caps at 17")
    func s7() {
        var random = JavaRandom(seed: 42)
        let ids = (0..<20).map { _ in random.nextBytes(16) }
        let built = GCSFilter.build(ids: ids, maxBytes: 400, p: 7)
        #expect(built.p == 7 && built.m == 2560)
        #expect(built.data == bytes("9f70036216b053c6482f149204105ade5d418f81cd00"))
        var random50 = JavaRandom(seed: 42)
        let ids50 = (0..<50).map { _ in random50.nextBytes(16) }
        let small = GCSFilter.build(ids: ids50, maxBytes: 20, p: 7)
        #expect(small.m == 2176 && small.data.count == 19 && small.includedCount == 17)
    }

    @Test("S8: iOS GCSFilterTests — 64 equal IDs give one value; bucket(01×16, M 2) = 1; bad P/M decode to ∅; P 200 rejected")
    func s8() {
        let built = GCSFilter.build(ids: Array(repeating: repeated(0xab, 16), count: 64), maxBytes: 128, p: 7)
        #expect(GCSFilter.decode(p: built.p, m: UInt64(built.m), data: built.data).count == 1)
        #expect(GCSFilter.bucket(h64: GCSFilter.h64(repeated(0x01, 16)), m: 2) == 1)
        for p in [0, -1, 33, 255] { #expect(GCSFilter.decode(p: p, m: 4096, data: [0xff, 0x00]).isEmpty) }
        for m: UInt64 in [0, 1] { #expect(GCSFilter.decode(p: 8, m: m, data: [0x01, 0x02]).isEmpty) }
        #expect(throws: WireError.invalidValue(field: .syncP, value: 200)) {
            try RequestSyncPayload.decode(bytes("01 0001 c8 02 0004 00001000 03 0002 0102"))
        }
        // M ≤ 1: nothing is ever a member ("send me everything").
        #expect(!GCSFilter.Membership(p: 7, m: 1, data: [0xff]).mightContain(h64: 0))
        #expect(GCSFilter.deriveP(targetFPR: 0.01) == 7)
        #expect(GCSFilter.estimateMaxElements(sizeBytes: 400, p: 7) == 355)
        #expect(GCSFilter.estimateMaxElements(sizeBytes: 256, p: 7) == 227)
        #expect(GCSFilter.hashRange(count: 1 << 30, p: 7) == .max)
    }
}

extension String {
    var replacingPipes: String { filter { $0 != "|" } }
}
