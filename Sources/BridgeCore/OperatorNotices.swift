public import BitchatWire
public import BotCrypto
public import MeshSync

/// Operator notices (issue 17 part 5): board posts the bridge itself authors with its Ed25519 key — "water point
/// moved to gate C" — posted on the mesh, kept in its board store (so sync serves them), copied to Nostr as any
/// accepted geohash post is (BOARD.md §11), withdrawn with a tombstone plus kind 5.
public enum OperatorNotice {
    public enum Defaults {
        /// A notice lasts 12 hours unless `--expires` says otherwise: a festival day's announcement outlives the
        /// evening but not the next morning's (BOARD.md allows up to 7 days, ``BoardPayload/Limits/maxLifetimeMs``).
        public static let lifetimeMs: UInt64 = 12 * 60 * 60 * 1000
        /// The nickname a notice carries (the board shows it beside the text).
        public static let nickname = "bridge"
    }

    /// The post for a notice: postID = the first 16 bytes of SHA-256(author key ‖ createdAt ‖ content), so a
    /// notice is one post however often it is relayed; checked by the same decoder the mesh's posts pass.
    public static func compose(
        _ text: String, urgent: Bool, lifetimeMs: UInt64, geohash: String, nickname: String, now: UInt64, key: Ed25519PrivateKey
    ) throws(NoticeError) -> BoardPost {
        guard lifetimeMs > 0, lifetimeMs <= BoardPayload.Limits.maxLifetimeMs else { throw .lifetime(ms: lifetimeMs) }
        var seed = key.publicKey.rawRepresentation
        seed += (0..<8).reversed().map { UInt8(truncatingIfNeeded: now >> (8 * UInt64($0))) }
        seed += Array(text.utf8)
        let post: BoardPost
        do {
            post = try BoardPost.signed(
                postID: Array(SHA256.hash(seed).prefix(BoardPayload.Limits.postIDLength)), geohash: geohash, content: text,
                nickname: nickname, createdAt: now, expiresAt: now + lifetimeMs, flags: urgent ? BoardPost.urgentFlag : 0, key: key)
        } catch {
            throw .signing(error)
        }
        do {
            _ = try BoardPayload.decode(BoardPayload.post(post).encode())
        } catch {
            throw .invalid(error)
        }
        return post
    }

    /// `--expires` values: a positive whole number of minutes (`30m`), hours (`2h`) or days (`3d`), in ms, at most
    /// the board's 7 days (so the CLI refuses `30d` as a usage error before it asks the bridge).
    public static func parseDuration(_ text: String) throws(NoticeError) -> UInt64 {
        guard let unit = text.last, let count = UInt64(text.dropLast()), count > 0 else { throw .duration(text) }
        let unitMs: UInt64
        switch unit {
        case "m": unitMs = 60_000
        case "h": unitMs = 3_600_000
        case "d": unitMs = 86_400_000
        default: throw .duration(text)
        }
        let (ms, overflow) = count.multipliedReportingOverflow(by: unitMs)
        guard !overflow else { throw .duration(text) }
        guard ms <= BoardPayload.Limits.maxLifetimeMs else { throw .lifetime(ms: ms) }
        return ms
    }
}

/// Why a notice could not be posted or withdrawn (the control socket sends the description back).
public enum NoticeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bridge runs without a board store.
    case noBoard
    /// The lifetime is 0 or beyond the board's 7 days.
    case lifetime(ms: UInt64)
    /// An `--expires` value that is not `<n>m`, `<n>h` or `<n>d`.
    case duration(String)
    /// The post would not decode on a phone (empty or over 512 bytes of text, a geohash outside the alphabet…).
    case invalid(WireError)
    case signing(CryptoError)
    /// The 0x23 packet around it could not be signed.
    case packetSigning(MeshSigningError)
    /// The board store refused it.
    case rejected(BoardRejection)
    /// The same notice (same text in the same millisecond) is held already.
    case alreadyPosted(String)
    /// No live notice of this bridge has that id (hex).
    case unknown(String)

    public var description: String {
        switch self {
        case .noBoard: "this bridge keeps no board store"
        case .lifetime(let ms): "a notice lives more than 0 and at most 7 days (asked: \(ms / 1000) s)"
        case .duration(let text): "expiry \"\(text)\" is not <n>m, <n>h or <n>d"
        case .invalid(let error): "the notice would not decode on a phone: \(error)"
        case .signing(let error): "signing failed: \(error)"
        case .packetSigning(let error): "signing the packet failed: \(error)"
        case .rejected(let reason): "the board store refused it: \(reason.rawValue)"
        case .alreadyPosted(let id): "notice \(id) is posted already"
        case .unknown(let id): "no live notice of this bridge has id \(id)"
        }
    }
}
