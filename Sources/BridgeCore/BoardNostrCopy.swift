public import BotSupport
public import BitchatWire
public import BotCrypto
public import Nostr

/// The bridge's Nostr copy of a board post (BOARD.md §11 "Ours"): a kind-1 note in the shape the author's own
/// phone would publish (iOS `createGeohashTextNote`), signed by the bridge's key for the post's geohash, and
/// the NIP-09 kind 5 that deletes it when the author's tombstone arrives. Nothing is minted from a Nostr note
/// (a bridge cannot author a post for someone else), but the copy carries the author's own packet in a
/// `bitchat-board` tag (ours, not upstream's), so a bridge on another island can serve the original — a post
/// authenticates itself by its inner signature (BOARD.md §0.1, §4) and is re-served unchanged but TTL (§0.4).
public enum BoardNostrCopy {
    /// NIP-01 text note: what iOS and Android publish for a bridged board post.
    public static let textNoteKind = 1
    /// NIP-09 deletion request.
    public static let deletionKind = 5
    /// Ours: the tag carrying the stored outer 0x23 packet (unpadded, standard base64), last on the note and on
    /// the kind 5. Phones ignore tags they do not know.
    public static let packetTag = "bitchat-board"

    /// The note for `post`: content and nickname byte-exact; tags in upstream order g, n (omitted when the
    /// nickname is empty), expiration (NIP-40, `floor(expiresAt / 1000)`), t=urgent (only when the post's
    /// urgent flag is set); `created_at = floor(createdAt / 1000)`, so iPhones' 15-min `UnifiedNotices`
    /// heuristic shows the copy next to the board post instead of twice.
    /// `frame` (the post's stored packet, unpadded) goes last as the ``packetTag`` tag.
    public static func note(for post: BoardPost, carrying frame: [UInt8]? = nil, key: SchnorrSecretKey) throws(CryptoError) -> NostrEvent {
        var tags: [[String]] = [["g", post.geohash]]
        if !post.nickname.isEmpty { tags.append(["n", post.nickname]) }
        tags.append(["expiration", String(post.expiresAt / 1000)])
        if post.isUrgent { tags.append(["t", "urgent"]) }
        if let frame { tags.append([packetTag, Base64.encode(frame)]) }
        let unsigned = UnsignedEvent(
            pubkey: key.publicKey, createdAt: Int64(post.createdAt / 1000), kind: textNoteKind, tags: tags, content: post.content)
        return try unsigned.signed(with: key)
    }

    /// The kind 5 for the copy `eventID`: `tags = [["e", id]]` (no `k` tag), empty content, as iOS
    /// `createDeleteEvent` — signed by the same per-geohash key that signed the copy. With `carrying`, the
    /// tombstone's stored packet (ours): then `["g", geohash]` (so bridges subscribed by `#g` receive it) and the
    /// ``packetTag`` tag follow the `e` tag.
    public static func deletion(
        of eventID: EventID, at now: Int64, carrying tombstone: (geohash: String, frame: [UInt8])? = nil, key: SchnorrSecretKey
    ) throws(CryptoError) -> NostrEvent {
        var tags = [["e", eventID.hex]]
        if let tombstone { tags += [["g", tombstone.geohash], [packetTag, Base64.encode(tombstone.frame)]] }
        return try UnsignedEvent(pubkey: key.publicKey, createdAt: now, kind: deletionKind, tags: tags, content: "").signed(with: key)
    }

    /// What a note or kind 5 from the relays carries for the board.
    public enum Carried: Equatable, Sendable {
        /// No ``packetTag`` tag (a phone's own note, an ordinary deletion): nothing for the board.
        case nothing
        /// A tag that is not taken, and the outcome it is counted as.
        case dropped(BoardNostrOutcome)
        /// A decoded 0x23 packet whose inner signature verifies, for a served geohash: the owner judges it and
        /// offers it to its board store, as it would the same packet from the mesh.
        case packet(MeshPacket, BoardPayload)
    }

    /// Reads the ``packetTag`` tag of `event` (kind 1 or 5): standard base64 of one mesh packet of type 0x23 whose
    /// board payload decodes and verifies under the key it carries; the event's `g` tag must be one of `served`,
    /// and a post's own geohash must equal it. Who signed the event does not matter — the inner signature does.
    public static func carried(in event: NostrEvent, served: Set<String>) -> Carried {
        guard event.kind == textNoteKind || event.kind == deletionKind, let tag = event.firstTag(packetTag) else { return .nothing }
        guard tag.count >= 2, let bytes = try? Base64.decode(tag[1]), let packet = try? MeshPacket.decode(bytes),
              packet.type == .boardPost, let payload = try? BoardPayload.decode(packet.payload)
        else { return .dropped(.inboundUndecodable) }
        guard payload.isSignatureValid else { return .dropped(.inboundBadSignature) }
        guard let g = event.firstTag("g"), g.count >= 2, served.contains(g[1]) else { return .dropped(.inboundWrongGeohash) }
        if case .post(let post) = payload, post.geohash != g[1] { return .dropped(.inboundWrongGeohash) }
        return .packet(packet, payload)
    }
}

/// Kind-1 geohash notes the relays delivered recently, so the bridge skips a post whose author's phone already
/// bridged it (BOARD.md §11: "skip a post when a note with the same g, content and n already exists on its
/// relays within 15 min"). A pure, bounded index; the coordinator feeds it from its `board-<geohash>`
/// subscription.
public struct RecentBoardNotes: Sendable {
    public enum Limits {
        /// Notes remembered: a busy cell's relays deliver at most 200 per subscription backfill (the readers'
        /// limit, §11), so 1,000 holds several backfills and a quarter hour of live notes.
        public static let maxNotes = 1_000
        /// How far apart a note's `created_at` and the post's `createdAt` may be and still count as the
        /// author's copy (§11: 15 min, the window of iOS `UnifiedNotices`).
        public static let windowSeconds: Int64 = 15 * 60
    }

    private struct Key: Hashable, Sendable {
        var geohash: String
        var content: String
        var nickname: String
    }

    private var createdAt: [Key: [Int64]] = [:]
    private var order: [Key] = []
    private var head = 0

    public init() {}

    /// How many notes are held.
    public var count: Int { order.count - head }

    /// Remembers a kind-1 note with a `g` tag; anything else is ignored.
    public mutating func record(_ event: NostrEvent) {
        guard event.kind == BoardNostrCopy.textNoteKind, let g = event.firstTag("g"), g.count >= 2 else { return }
        let nickname = event.firstTag("n").flatMap { $0.count >= 2 ? $0[1] : nil } ?? ""
        let key = Self.key(geohash: g[1], content: event.content, nickname: nickname)
        createdAt[key, default: []].append(event.createdAt)
        order.append(key)
        while count > Limits.maxNotes {
            let old = order[head]
            head += 1
            if var times = createdAt[old] {
                times.removeFirst()
                createdAt[old] = times.isEmpty ? nil : times
            }
        }
        if head > Limits.maxNotes {
            order.removeFirst(head)
            head = 0
        }
    }

    /// Whether a note with the post's geohash, content and nickname (compared trimmed: iOS trims both before it
    /// publishes) was seen within ``Limits/windowSeconds`` of the post's creation.
    public func authorBridged(_ post: BoardPost) -> Bool {
        let key = Self.key(geohash: post.geohash, content: post.content, nickname: post.nickname)
        let created = Int64(post.createdAt / 1000)
        return createdAt[key]?.contains { abs($0 - created) <= Limits.windowSeconds } ?? false
    }

    private static func key(geohash: String, content: String, nickname: String) -> Key {
        Key(geohash: geohash, content: trimmed(content), nickname: trimmed(nickname))
    }

    private static func trimmed(_ text: String) -> String {
        var scalars = Substring(text)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}

/// What the bridge did with an accepted board packet on the Nostr side (`bitchat_bridge_board_nostr_total{outcome}`).
public enum BoardNostrOutcome: String, CounterKey, CaseIterable {
    /// A kind-1 copy of a geohash post was published.
    case published
    /// A kind-1 note with the post's geohash, content and nickname was already on the relays (its author's phone).
    case authorBridged = "author_bridged"
    /// A mesh-local post, or one for a geohash this bridge does not serve: never bridged.
    case notBridged = "not_bridged"
    /// A tombstone deleted a bridged post: a kind 5 for the copy was published.
    case deleted
    /// Signing or the ledger failed (logged).
    case failed
    /// From Nostr (a ``BoardNostrCopy/packetTag`` tag): accepted by the board store and broadcast on the mesh.
    case inboundRelayed = "inbound_relayed"
    /// From Nostr: accepted, but its outer timestamp is outside the phones' ±120 s ingress gate (MESH-WIRE §7.4),
    /// so it is served through sync only.
    case inboundStored = "inbound_stored"
    /// From Nostr: already held (the mesh or an earlier relay delivered it; also the bridge's own copy coming back).
    case inboundDuplicate = "inbound_duplicate"
    /// From Nostr: hidden by the judgement (block list, spam filter with the author key as sender).
    case inboundHidden = "inbound_hidden"
    /// From Nostr: refused by the board store (expired, deleted, not the author, too far in the future, …).
    case inboundRejected = "inbound_rejected"
    /// From Nostr: the tag is not base64 of a 0x23 packet whose board payload decodes.
    case inboundUndecodable = "inbound_undecodable"
    /// From Nostr: the inner signature does not verify under the key the payload carries.
    case inboundBadSignature = "inbound_bad_signature"
    /// From Nostr: no `g` tag of a served channel, or a post whose geohash is not the event's `g`.
    case inboundWrongGeohash = "inbound_wrong_geohash"
}
