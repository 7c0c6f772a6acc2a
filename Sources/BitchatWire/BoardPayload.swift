public import BotCrypto

/// The bulletin-board payload (type 0x23), BOARD.md §3–§5: a signed post or a tombstone, as TLVs with a
/// 1-byte type and a **2-byte** big-endian length.
///
/// ```
/// post:      01 0001 01 | 02 0010 postID | 03 len geohash | 04 len content | 05 0020 author key |
///            06 len nickname | 07 0008 createdAt | 08 0008 expiresAt | 09 0001 flags | 0a 0040 signature
/// tombstone: 01 0001 02 | 02 0010 postID | 05 0020 author key | 0b 0008 deletedAt | 0a 0040 signature
/// ```
///
/// The decoder is iOS `BoardWire.decode` exactly (BOARD.md §3): any order, the later repeat wins, unknown
/// types skipped, 1–2 trailing bytes ignored; hard length errors reject at once, invalid UTF-8 strings and
/// non-8-byte times read as missing, a kind other than 1/2 reads as missing. Every rejection is a named
/// ``WireError``. The signature (§4) is checked against the key inside the payload, never the outer packet.
public enum BoardPayload: Sendable, Equatable {
    case post(BoardPost)
    case tombstone(BoardTombstone)

    public enum Limits {
        public static let postIDLength = 16
        public static let keyLength = 32
        public static let signatureLength = 64
        /// Content bytes (UTF-8), at least 1.
        public static let maxContentBytes = 512
        public static let maxNicknameBytes = 64
        /// Empty (the mesh-local board) or up to 12 lowercase base32 characters.
        public static let maxGeohashBytes = 12
        /// `expiresAt − createdAt` ≤ 7 days (`maxLifetimeMs`).
        public static let maxLifetimeMs: UInt64 = 7 * 24 * 60 * 60 * 1000
        /// The geohash alphabet (no `a i l o`, lowercase only).
        public static let geohashAlphabet = Set("0123456789bcdefghjkmnpqrstuvwxyz".utf8)
    }

    static let postContext = Array("bitchat-board-v1".utf8)
    static let tombstoneContext = Array("bitchat-board-del-v1".utf8)

    /// The post's or tombstone's ID.
    public var postID: [UInt8] {
        switch self {
        case .post(let post): post.postID
        case .tombstone(let tombstone): tombstone.postID
        }
    }

    /// The author key inside the payload.
    public var authorKey: [UInt8] {
        switch self {
        case .post(let post): post.authorKey
        case .tombstone(let tombstone): tombstone.authorKey
        }
    }

    /// Verifies the inner signature under the inner author key (§4).
    public var isSignatureValid: Bool {
        switch self {
        case .post(let post): post.isSignatureValid
        case .tombstone(let tombstone): tombstone.isSignatureValid
        }
    }

    public func encode() -> [UInt8] {
        var out: [UInt8] = []
        func u64(_ value: UInt64) -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.appendBigEndian(value, size: 8)
            return bytes
        }
        switch self {
        case .post(let post):
            out.appendTLV16(0x01, [0x01])
            out.appendTLV16(0x02, post.postID)
            out.appendTLV16(0x03, Array(post.geohash.utf8))
            out.appendTLV16(0x04, Array(post.content.utf8))
            out.appendTLV16(0x05, post.authorKey)
            out.appendTLV16(0x06, Array(post.nickname.utf8))
            out.appendTLV16(0x07, u64(post.createdAt))
            out.appendTLV16(0x08, u64(post.expiresAt))
            out.appendTLV16(0x09, [post.flags])
            out.appendTLV16(0x0A, post.signature)
        case .tombstone(let tombstone):
            out.appendTLV16(0x01, [0x02])
            out.appendTLV16(0x02, tombstone.postID)
            out.appendTLV16(0x05, tombstone.authorKey)
            out.appendTLV16(0x0B, u64(tombstone.deletedAt))
            out.appendTLV16(0x0A, tombstone.signature)
        }
        return out
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> BoardPayload {
        var kind: UInt8?
        var postID: [UInt8]?
        var geohash: String?
        var content: String?
        var contentBytes = 0
        var key: [UInt8]?
        var nickname: String?
        var createdAt: UInt64?
        var expiresAt: UInt64?
        var flags: UInt8?
        var signature: [UInt8]?
        var deletedAt: UInt64?
        func u64(_ value: [UInt8]) -> UInt64? {
            value.count == 8 ? value.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } : nil
        }
        var reader = ByteReader(bytes)
        while reader.remaining >= 3 {
            let (type, value) = try reader.tlv(lengthSize: { _ in 2 })
            switch type {
            case 0x01:
                guard value.count == 1 else { throw .invalidLength(field: .boardKind, length: value.count) }
                kind = value[0] == 1 || value[0] == 2 ? value[0] : nil
            case 0x02:
                guard value.count == Limits.postIDLength else { throw .invalidLength(field: .postID, length: value.count) }
                postID = value
            case 0x03:
                guard value.count <= Limits.maxGeohashBytes else { throw .invalidLength(field: .boardGeohash, length: value.count) }
                geohash = decodeUTF8(value)
            case 0x04:
                guard value.count <= Limits.maxContentBytes else { throw .invalidLength(field: .content, length: value.count) }
                contentBytes = value.count
                content = decodeUTF8(value)
            case 0x05:
                guard value.count == Limits.keyLength else { throw .invalidLength(field: .authorKey, length: value.count) }
                key = value
            case 0x06:
                guard value.count <= Limits.maxNicknameBytes else { throw .invalidLength(field: .authorNickname, length: value.count) }
                nickname = decodeUTF8(value)
            case 0x07: createdAt = u64(value)
            case 0x08: expiresAt = u64(value)
            case 0x09:
                guard value.count == 1 else { throw .invalidLength(field: .boardFlags, length: value.count) }
                flags = value[0]
            case 0x0A:
                guard value.count == Limits.signatureLength else { throw .invalidLength(field: .boardSignature, length: value.count) }
                signature = value
            case 0x0B: deletedAt = u64(value)
            default: continue
            }
        }
        guard let postID else { throw .missingTLV(0x02) }
        guard let key else { throw .missingTLV(0x05) }
        guard let signature else { throw .missingTLV(0x0A) }
        switch kind {
        case 0x01:
            guard let geohash else { throw .missingTLV(0x03) }
            guard let content else { throw .missingTLV(0x04) }
            guard let nickname else { throw .missingTLV(0x06) }
            guard let createdAt else { throw .missingTLV(0x07) }
            guard let expiresAt else { throw .missingTLV(0x08) }
            guard let flags else { throw .missingTLV(0x09) }
            guard contentBytes >= 1 else { throw .invalidLength(field: .content, length: 0) }
            guard geohash.utf8.allSatisfy({ Limits.geohashAlphabet.contains($0) }) else {
                throw .invalidValue(field: .boardGeohash, value: geohash.utf8.count)
            }
            guard expiresAt > createdAt, expiresAt - createdAt <= Limits.maxLifetimeMs else {
                throw .invalidValue(field: .lifetime, value: 0)
            }
            return .post(BoardPost(
                postID: postID, geohash: geohash, content: content, authorKey: key, nickname: nickname,
                createdAt: createdAt, expiresAt: expiresAt, flags: flags, signature: signature))
        case 0x02:
            guard let deletedAt else { throw .missingTLV(0x0B) }
            return .tombstone(BoardTombstone(postID: postID, authorKey: key, deletedAt: deletedAt, signature: signature))
        default:
            throw .missingTLV(0x01)
        }
    }

    /// iOS `BoardWire.urgentFlag(in:)`, the relay path's peek: the **first** TLV 0x09 of length 1 decides,
    /// whatever the kind; an overrun or none gives false.
    public static func urgentFlag(in bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset + 3 <= bytes.count {
            let type = bytes[offset]
            let length = Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            offset += 3
            guard offset + length <= bytes.count else { return false }
            if type == 0x09, length == 1 { return bytes[offset] & BoardPost.urgentFlag != 0 }
            offset += length
        }
        return false
    }
}

/// A board post (kind 1).
public struct BoardPost: Sendable, Equatable {
    /// Flags bit 0: urgent. Other bits are signed and preserved.
    public static let urgentFlag: UInt8 = 0x01

    public var postID: [UInt8]
    /// "" = the mesh-local board.
    public var geohash: String
    public var content: String
    /// Ed25519 public key, 32 bytes.
    public var authorKey: [UInt8]
    public var nickname: String
    /// ms since the epoch.
    public var createdAt: UInt64
    public var expiresAt: UInt64
    public var flags: UInt8
    public var signature: [UInt8]

    public init(
        postID: [UInt8], geohash: String, content: String, authorKey: [UInt8], nickname: String, createdAt: UInt64,
        expiresAt: UInt64, flags: UInt8, signature: [UInt8]
    ) {
        self.postID = postID
        self.geohash = geohash
        self.content = content
        self.authorKey = authorKey
        self.nickname = nickname
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.flags = flags
        self.signature = signature
    }

    public var isUrgent: Bool { flags & Self.urgentFlag != 0 }

    /// §4 pre-image: `0x10 "bitchat-board-v1" ‖ postID ‖ len‖geohash ‖ len‖content ‖ key ‖ len‖nickname ‖
    /// createdAt ‖ expiresAt ‖ flags` (lengths u16 BE).
    public var signingBytes: [UInt8] {
        var out: [UInt8] = [UInt8(BoardPayload.postContext.count)] + BoardPayload.postContext
        out += postID
        for text in [geohash, content] {
            let bytes = Array(text.utf8)
            out.appendBigEndian(UInt64(bytes.count), size: 2)
            out += bytes
        }
        out += authorKey
        let nick = Array(nickname.utf8)
        out.appendBigEndian(UInt64(nick.count), size: 2)
        out += nick
        out.appendBigEndian(createdAt, size: 8)
        out.appendBigEndian(expiresAt, size: 8)
        out.append(flags)
        return out
    }

    public var isSignatureValid: Bool { verifyBoardSignature(signature, over: signingBytes, key: authorKey) }

    /// A post signed by `key` (its public key becomes the author key).
    public static func signed(
        postID: [UInt8], geohash: String, content: String, nickname: String, createdAt: UInt64, expiresAt: UInt64,
        flags: UInt8, key: Ed25519PrivateKey
    ) throws(CryptoError) -> BoardPost {
        var post = BoardPost(
            postID: postID, geohash: geohash, content: content, authorKey: key.publicKey.rawRepresentation, nickname: nickname,
            createdAt: createdAt, expiresAt: expiresAt, flags: flags, signature: [])
        post.signature = try key.signature(for: post.signingBytes)
        return post
    }
}

/// A tombstone (kind 2): deletes a post, honoured only when its key is the post's author key (§5).
public struct BoardTombstone: Sendable, Equatable {
    public var postID: [UInt8]
    public var authorKey: [UInt8]
    public var deletedAt: UInt64
    public var signature: [UInt8]

    public init(postID: [UInt8], authorKey: [UInt8], deletedAt: UInt64, signature: [UInt8]) {
        self.postID = postID
        self.authorKey = authorKey
        self.deletedAt = deletedAt
        self.signature = signature
    }

    /// §4 pre-image: `0x14 "bitchat-board-del-v1" ‖ postID ‖ deletedAt u64 BE` (the key is not covered).
    public var signingBytes: [UInt8] {
        var out: [UInt8] = [UInt8(BoardPayload.tombstoneContext.count)] + BoardPayload.tombstoneContext
        out += postID
        out.appendBigEndian(deletedAt, size: 8)
        return out
    }

    public var isSignatureValid: Bool { verifyBoardSignature(signature, over: signingBytes, key: authorKey) }

    public static func signed(postID: [UInt8], deletedAt: UInt64, key: Ed25519PrivateKey) throws(CryptoError) -> BoardTombstone {
        var tombstone = BoardTombstone(postID: postID, authorKey: key.publicKey.rawRepresentation, deletedAt: deletedAt, signature: [])
        tombstone.signature = try key.signature(for: tombstone.signingBytes)
        return tombstone
    }
}

private func verifyBoardSignature(_ signature: [UInt8], over message: [UInt8], key: [UInt8]) -> Bool {
    guard let publicKey = try? Ed25519PublicKey(rawRepresentation: key) else { return false }
    return publicKey.isValidSignature(signature, for: message)
}
