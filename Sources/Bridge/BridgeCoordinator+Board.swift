public import BitchatWire
import BotCrypto
import BotStorage
import BotSupport
import Geohash
import IdentityCache
import Mesh
import ModerationLog
import MeshSync
import Nostr
import SpamFilter
import Synchronization
import Identity
public import BridgeCore

/// The coordinator's board (BOARD.md): board posts judged like mesh messages, other islands' board packets
/// carried in from Nostr, accepted posts and tombstones copied to Nostr (§11), and the operator's notices.
extension BridgeCoordinator {
    /// Judges a board post as a mesh message (block list when its author key is a known peer's, spam filter with
    /// the author key as sender); hidden ones go to the moderation log through the router's actions.
    func admitBoardPost(_ post: BoardPost, now: Double) -> Bool {
        let author = peerSigningKeys.first { $0.value == post.authorKey }?.key
        let candidate = BridgeRouter.Candidate(
            direction: .meshToNostr, senderKey: Hex.encode(post.authorKey),
            identity: author.flatMap { peerNoiseKeys[$0] }.flatMap { try? IdentityKey.mesh(noiseKey: $0) },
            messageID: Hex.encode(post.postID), timestamp: Double(post.createdAt) / 1000, text: post.content,
            displayName: post.nickname)
        let (admitted, actions) = router.boardPost(candidate, now: now)
        perform(actions)
        return admitted
    }

    /// Another island's board packet carried in a note or kind 5 (``BoardNostrCopy/carried(in:served:)``): judged
    /// like the same packet from the mesh, offered to the board store, and when accepted broadcast on this mesh
    /// at TTL 7, unchanged otherwise — only while its outer timestamp passes the phones' ±120 s ingress gate
    /// (MESH-WIRE §7.4); older ones are served by sync alone. Never copied back to Nostr.
    func carryFromNostr(_ event: NostrEvent, now: Double) {
        guard let sync = stores.sync else { return }
        let served = Set(router.settings.servedChannels.map(\.string))
        let packet: MeshPacket
        switch BoardNostrCopy.carried(in: event, served: served) {
        case .nothing: return
        case .dropped(let outcome):
            boardNostr.add(outcome)
            logger.debug("board packet from nostr dropped", [("event.id", .string(event.id.hex)), ("outcome", .string(outcome.label))])
            return
        case .packet(let carried, let payload):
            if case .post(let post) = payload, !admitBoardPost(post, now: now) { return boardNostr.add(.inboundHidden) }
            packet = carried
        }
        guard let stored = try? SyncPacket(packet) else { return boardNostr.add(.inboundUndecodable) }
        let nowMs = Self.ms(now)
        switch sync.ingest(stored, now: nowMs) {
        case .accepted:
            let skew = packet.timestamp > nowMs ? packet.timestamp - nowMs : nowMs - packet.timestamp
            let fresh = skew <= MeshPeerEngine.Limits.maxClockSkewMs
            if fresh { submit(.broadcastBoard(packet)) }
            boardNostr.add(fresh ? .inboundRelayed : .inboundStored)
            logger.info("board packet from nostr", [
                ("event.id", .string(event.id.hex)), ("packet.sender", .string(packet.sender.hex)), ("broadcast", .bool(fresh)),
            ])
        case .duplicate: boardNostr.add(.inboundDuplicate)
        case .rejected(let reason):
            boardNostr.add(.inboundRejected)
            logger.debug("board packet from nostr rejected", [("event.id", .string(event.id.hex)), ("reason", .string(reason.rawValue))])
        }
    }

    /// BOARD.md §11 "Ours": an accepted geohash post of a served channel is published once as a kind-1 note under
    /// the bridge's key for that geohash (unless its author's phone bridged it already), its event id kept in the
    /// ledger and its stored packet carried in the ``BoardNostrCopy/packetTag`` tag; a tombstone that deleted a
    /// post the bridge copied publishes a kind 5 for the copy, carrying the tombstone's packet the same way.
    func copyToNostr(_ stored: SyncPacket, deletedPost: BoardPost?, now: Double) {
        guard let ledger = stores.boardLedger, let payload = try? BoardPayload.decode(stored.packet.payload) else { return }
        let served = Set(router.settings.servedChannels.map(\.string))
        do {
            switch payload {
            case .post(let post):
                guard !post.geohash.isEmpty, served.contains(post.geohash) else { return boardNostr.add(.notBridged) }
                guard !boardNotes.authorBridged(post) else { return boardNostr.add(.authorBridged) }
                guard try ledger.eventID(forPost: post.postID, now: Self.ms(now)) == nil else { return }
                let event = try BoardNostrCopy.note(for: post, carrying: stored.frame, key: keys.channelKey(geohash: post.geohash))
                try ledger.record(postID: post.postID, eventID: event.id.bytes, expiresAt: post.expiresAt, now: Self.ms(now))
                router.recordOwnPublication(event.id)
                boardNotes.record(event)
                relays.publish(event)
                boardNostr.add(.published)
                logger.info("board post copied to nostr", [
                    ("post.id", .string(Hex.encode(post.postID))), ("event.id", .string(event.id.hex)), ("geohash", .string(post.geohash)),
                ])
            case .tombstone(let tombstone):
                guard let post = deletedPost, post.postID == tombstone.postID,
                      let bytes = try ledger.eventID(forPost: post.postID, now: Self.ms(now)),
                      let copy = EventID(bytes: bytes)
                else { return }
                let deletion = try BoardNostrCopy.deletion(
                    of: copy, at: Int64(now), carrying: (post.geohash, stored.frame), key: keys.channelKey(geohash: post.geohash))
                try ledger.forget(postID: post.postID)
                router.recordOwnPublication(deletion.id)
                relays.publish(deletion)
                boardNostr.add(.deleted)
                logger.info("board post copy deleted on nostr", [
                    ("post.id", .string(Hex.encode(post.postID))), ("event.id", .string(copy.hex)), ("deletion.id", .string(deletion.id.hex)),
                ])
            }
        } catch {
            boardNostr.add(.failed)
            logger.warning("board post nostr copy failed", [("error", .string("\(error)"))])
        }
    }

    // MARK: Operator notices

    /// Posts an operator notice (``OperatorNotice``): a board post signed by the bridge's Ed25519 key, for
    /// `geohash` (nil = the bridge's channel; "" = the mesh-local board), kept in the board store so sync serves
    /// it, sent on the mesh as the packet the store holds (signed here, so every copy is byte-identical), and
    /// copied to Nostr as any accepted geohash post of a served channel is.
    public func postNotice(
        _ text: String, urgent: Bool, lifetimeMs: UInt64 = OperatorNotice.Defaults.lifetimeMs, geohash: String? = nil,
        nickname: String = OperatorNotice.Defaults.nickname
    ) -> Result<BoardPost, NoticeError> {
        guard let sync = stores.sync else { return .failure(.noBoard) }
        let now = dependencies.unixNow()
        let nowMs = Self.ms(now)
        let post: BoardPost
        let packet: MeshPacket
        do throws(NoticeError) {
            post = try OperatorNotice.compose(
                text, urgent: urgent, lifetimeMs: lifetimeMs, geohash: geohash ?? channel ?? "", nickname: nickname, now: nowMs,
                key: keys.signingKey)
            packet = try signedBoardPacket(.post(post), now: nowMs)
        } catch {
            return .failure(error)
        }
        guard let stored = try? SyncPacket(packet) else { return .failure(.rejected(.undecodable)) }
        switch sync.ingest(stored, now: nowMs) {
        case .accepted:
            syncBoardOutcomes.add(.accepted)
            submit(.originateSigned(packet))
            copyToNostr(stored, deletedPost: nil, now: now)
            logger.notice("notice posted", [
                ("post.id", .string(Hex.encode(post.postID))), ("geohash", .string(post.geohash)), ("urgent", .bool(urgent)),
                ("expires_at_ms", .integer(Int64(clamping: post.expiresAt))),
            ])
            return .success(post)
        case .duplicate: return .failure(.alreadyPosted(Hex.encode(post.postID)))
        case .rejected(let reason): return .failure(.rejected(reason))
        }
    }

    /// Withdraws a live notice of this bridge: its tombstone goes into the board store and on the mesh, and the
    /// Nostr copy (if one was published) gets its kind 5.
    public func withdrawNotice(postID: [UInt8]) -> Result<Void, NoticeError> {
        guard let sync = stores.sync else { return .failure(.noBoard) }
        let now = dependencies.unixNow()
        let nowMs = Self.ms(now)
        let own = keys.signingKey.publicKey.rawRepresentation
        guard sync.livePosts(now: nowMs).contains(where: { $0.postID == postID && $0.authorKey == own }) else {
            return .failure(.unknown(Hex.encode(postID)))
        }
        let packet: MeshPacket
        do throws(NoticeError) {
            let tombstone: BoardTombstone
            do {
                tombstone = try BoardTombstone.signed(postID: postID, deletedAt: nowMs, key: keys.signingKey)
            } catch {
                throw .signing(error)
            }
            packet = try signedBoardPacket(.tombstone(tombstone), now: nowMs)
        } catch {
            return .failure(error)
        }
        guard let stored = try? SyncPacket(packet) else { return .failure(.rejected(.undecodable)) }
        switch sync.ingest(stored, now: nowMs) {
        case .accepted(let deleted):
            syncBoardOutcomes.add(.accepted)
            submit(.originateSigned(packet))
            copyToNostr(stored, deletedPost: deleted, now: now)
            logger.notice("notice withdrawn", [("post.id", .string(Hex.encode(postID)))])
            return .success(())
        case .duplicate: return .failure(.unknown(Hex.encode(postID)))
        case .rejected(let reason): return .failure(.rejected(reason))
        }
    }

    /// This bridge's live notices, newest first.
    public func notices() -> [BoardPost] {
        guard let sync = stores.sync else { return [] }
        let own = keys.signingKey.publicKey.rawRepresentation
        return sync.livePosts(now: Self.ms(dependencies.unixNow())).filter { $0.authorKey == own }
    }

    /// A 0x23 packet from this bridge, packet-signed (MESH-WIRE §4.4) as the engine signs its own.
    private func signedBoardPacket(_ payload: BoardPayload, now: UInt64) throws(NoticeError) -> MeshPacket {
        do {
            return try MeshPacket(type: .boardPost, timestamp: now, sender: ownPeerID, payload: payload.encode()).signed(with: keys.signingKey)
        } catch {
            throw .packetSigning(error)
        }
    }
}
