import BitchatWire
import BotCrypto
import MeshSync

/// A phone identity for tests: an Ed25519 signing key and a peer ID.
struct Phone {
    let key: Ed25519PrivateKey
    let id: MeshPeerID

    init(_ n: UInt8) {
        key = try! Ed25519PrivateKey(seed: [UInt8](repeating: n, count: 32))
        id = MeshPeerID(rawValue: 0x1000 + UInt64(n))
    }

    /// One of many identities (a flood): the key of `n`, an ID of its own.
    init(_ n: UInt8, seed: UInt32) {
        key = try! Ed25519PrivateKey(seed: [UInt8](repeating: n, count: 32))
        id = MeshPeerID(rawValue: 0x10_0000 + UInt64(seed))
    }

    func message(_ text: String, at ts: UInt64, recipient: MeshPeerID? = nil) -> SyncPacket {
        let packet = try! MeshPacket(type: .message, timestamp: ts, sender: id, recipient: recipient, payload: Array(text.utf8)).signed(with: key)
        return try! SyncPacket(packet)
    }

    func announce(at ts: UInt64) -> SyncPacket {
        let payload = try! AnnouncePayload(
            nickname: "p\(id.rawValue)", noisePublicKey: [UInt8](repeating: 7, count: 32),
            signingPublicKey: key.publicKey.rawRepresentation
        ).encode()
        return try! SyncPacket(try! MeshPacket(type: .announce, timestamp: ts, sender: id, payload: payload).signed(with: key))
    }

    func post(_ text: String, id postID: UInt8, createdAt: UInt64, lifetime: UInt64 = 86_400_000, urgent: Bool = false, ttl: UInt8 = 7) -> SyncPacket {
        let post = try! BoardPost.signed(
            postID: [UInt8](repeating: postID, count: 16), geohash: "", content: text, nickname: "n", createdAt: createdAt,
            expiresAt: createdAt + lifetime, flags: urgent ? 1 : 0, key: key)
        let packet = try! MeshPacket(type: .boardPost, ttl: ttl, timestamp: createdAt, sender: id, payload: BoardPayload.post(post).encode()).signed(with: key)
        return try! SyncPacket(packet)
    }

    func tombstone(id postID: UInt8, at ts: UInt64) -> SyncPacket {
        let tombstone = try! BoardTombstone.signed(postID: [UInt8](repeating: postID, count: 16), deletedAt: ts, key: key)
        let packet = try! MeshPacket(type: .boardPost, timestamp: ts, sender: id, payload: BoardPayload.tombstone(tombstone).encode()).signed(with: key)
        return try! SyncPacket(packet)
    }

    /// A signed TTL-0 REQUEST_SYNC to `to`.
    func request(_ payload: RequestSyncPayload, at ts: UInt64, to: MeshPeerID, ttl: UInt8 = 0, signed: Bool = true, key other: Ed25519PrivateKey? = nil) -> MeshPacket {
        let packet = MeshPacket(type: .requestSync, ttl: ttl, timestamp: ts, sender: id, recipient: to, payload: payload.encode())
        return signed ? try! packet.signed(with: other ?? key) : packet
    }
}

let t0: UInt64 = 1_750_000_000_000
let bridgeID = MeshPeerID(rawValue: 0xB0B0)
