public import BitchatWire
import BotCrypto
import BotSupport
import Geohash
import Identity
import Mesh
import MeshSync
import Nostr

/// The machine's board (BOARD.md): board posts judged like mesh messages, other islands' board packets carried
/// in from Nostr, accepted posts and tombstones copied to Nostr (§11), and the operator's notices.
extension BridgeMachine {
    /// Judges a board post as a mesh message (block list when its author key is a known peer's, spam filter with
    /// the author key as sender): whether it may be kept, and the actions (a hidden post's row).
    mutating func admitBoardPost(_ post: BoardPost, now: Double) -> (admitted: Bool, actions: [Action]) {
        let author = peers.peer(signingKey: post.authorKey)
        let candidate = BridgeRouter.Candidate(
            direction: .meshToNostr, senderKey: Hex.encode(post.authorKey),
            identity: author.flatMap { peers.noiseKeys[$0] }.flatMap { try? IdentityKey.mesh(noiseKey: $0) },
            messageID: Hex.encode(post.postID), timestamp: Double(post.createdAt) / 1000, text: post.content,
            displayName: post.nickname)
        let (admitted, routed) = router.boardPost(candidate, now: now)
        return (admitted, perform(routed, now: now))
    }

    /// Another island's board packet carried in a note or kind 5 (``BoardNostrCopy/carried(in:served:)``): judged
    /// like the same packet from the mesh, offered to the board store, and when accepted broadcast on this mesh at
    /// TTL 7, unchanged otherwise — only while its outer timestamp passes the phones' ±120 s ingress gate
    /// (MESH-WIRE §7.4); older ones are served by sync alone. Never copied back to Nostr.
    mutating func carryFromNostr(_ event: NostrEvent, now: Double) -> [Action] {
        guard responder != nil else { return [] }
        let served = Set(router.settings.servedChannels.map(\.string))
        var actions: [Action] = []
        let packet: MeshPacket
        switch BoardNostrCopy.carried(in: event, served: served) {
        case .nothing: return []
        case .dropped(let outcome):
            counters.boardNostr.add(outcome)
            return [.log(LogLine(.debug, "board packet from nostr dropped", [("event.id", .string(event.id.hex)), ("outcome", .string(outcome.label))]))]
        case .packet(let carried, let payload):
            if case .post(let post) = payload {
                let (admitted, judged) = admitBoardPost(post, now: now)
                actions += judged
                guard admitted else {
                    counters.boardNostr.add(.inboundHidden)
                    return actions
                }
            }
            packet = carried
        }
        guard let stored = try? SyncPacket(packet) else {
            counters.boardNostr.add(.inboundUndecodable)
            return actions
        }
        let nowMs = Self.ms(now)
        let (outcome, changes) = sync.ingest(stored, now: nowMs)
        if !changes.isEmpty { actions.append(.syncChanges(changes)) }
        switch outcome {
        case .accepted:
            let skew = packet.timestamp > nowMs ? packet.timestamp - nowMs : nowMs - packet.timestamp
            let fresh = skew <= MeshPeerEngine.Limits.maxClockSkewMs
            if fresh { actions.append(.mesh(.broadcastBoard(packet))) }
            counters.boardNostr.add(fresh ? .inboundRelayed : .inboundStored)
            actions.append(.log(LogLine(.info, "board packet from nostr", [
                ("event.id", .string(event.id.hex)), ("packet.sender", .string(packet.sender.hex)), ("broadcast", .bool(fresh)),
            ])))
        case .duplicate: counters.boardNostr.add(.inboundDuplicate)
        case .rejected(let reason):
            counters.boardNostr.add(.inboundRejected)
            actions.append(.log(LogLine(.debug, "board packet from nostr rejected", [("event.id", .string(event.id.hex)), ("reason", .string(reason.rawValue))])))
        }
        return actions
    }

    /// BOARD.md §11 "Ours": an accepted geohash post of a served channel is published once as a kind-1 note under
    /// the bridge's key for that geohash (unless its author's phone bridged it already), its event id kept in the
    /// ledger and its stored packet carried in the ``BoardNostrCopy/packetTag`` tag; a tombstone that deleted a
    /// post the bridge copied publishes a kind 5 for the copy, carrying the tombstone's packet the same way.
    mutating func copyToNostr(_ stored: SyncPacket, deletedPost: BoardPost?, now: Double) -> [Action] {
        guard configuration.boardCopies, let payload = try? BoardPayload.decode(stored.packet.payload) else { return [] }
        let served = Set(router.settings.servedChannels.map(\.string))
        let nowMs = Self.ms(now)
        do {
            switch payload {
            case .post(let post):
                guard !post.geohash.isEmpty, served.contains(post.geohash) else {
                    counters.boardNostr.add(.notBridged)
                    return []
                }
                guard !boardNotes.authorBridged(post) else {
                    counters.boardNostr.add(.authorBridged)
                    return []
                }
                guard ledger.eventID(forPost: post.postID, now: nowMs) == nil else { return [] }
                let event = try BoardNostrCopy.note(for: post, carrying: stored.frame, key: configuration.keys.channelKey(geohash: post.geohash))
                let change = ledger.record(.init(postID: post.postID, eventID: event.id.bytes, expiresAt: post.expiresAt), now: nowMs)
                router.recordOwnPublication(event.id)
                boardNotes.record(event)
                counters.boardNostr.add(.published)
                return [
                    .ledger(change), .publish(event),
                    .log(LogLine(.info, "board post copied to nostr", [
                        ("post.id", .string(Hex.encode(post.postID))), ("event.id", .string(event.id.hex)), ("geohash", .string(post.geohash)),
                    ])),
                ]
            case .tombstone(let tombstone):
                guard let post = deletedPost, post.postID == tombstone.postID,
                      let bytes = ledger.eventID(forPost: post.postID, now: nowMs), let copy = EventID(bytes: bytes)
                else { return [] }
                let deletion = try BoardNostrCopy.deletion(
                    of: copy, at: Int64(now), carrying: (post.geohash, stored.frame), key: configuration.keys.channelKey(geohash: post.geohash))
                let change = ledger.forget(postID: post.postID)
                router.recordOwnPublication(deletion.id)
                counters.boardNostr.add(.deleted)
                return [
                    .ledger(change), .publish(deletion),
                    .log(LogLine(.info, "board post copy deleted on nostr", [
                        ("post.id", .string(Hex.encode(post.postID))), ("event.id", .string(copy.hex)), ("deletion.id", .string(deletion.id.hex)),
                    ])),
                ]
            }
        } catch {
            counters.boardNostr.add(.failed)
            return [.log(LogLine(.warning, "board post nostr copy failed", [("error", .string("\(error)"))]))]
        }
    }

    // MARK: Operator notices

    /// Posts an operator notice (issue 17 part 5): a board post authored and signed by the bridge, kept in its
    /// board store (so sync serves it), sent on the mesh and copied to Nostr like any accepted geohash post.
    public mutating func postNotice(
        _ text: String, urgent: Bool, lifetimeMs: UInt64 = OperatorNotice.Defaults.lifetimeMs, geohash: String? = nil,
        nickname: String = OperatorNotice.Defaults.nickname, now: Double
    ) -> (result: Result<BoardPost, NoticeError>, actions: [Action]) {
        guard responder != nil else { return (.failure(.noBoard), []) }
        let nowMs = Self.ms(now)
        let post: BoardPost
        let packet: MeshPacket
        do throws(NoticeError) {
            post = try OperatorNotice.compose(
                text, urgent: urgent, lifetimeMs: lifetimeMs, geohash: geohash ?? channel ?? "", nickname: nickname, now: nowMs,
                key: configuration.keys.signingKey)
            packet = try signedBoardPacket(.post(post), now: nowMs)
        } catch {
            return (.failure(error), [])
        }
        guard let stored = try? SyncPacket(packet) else { return (.failure(.rejected(.undecodable)), []) }
        let (outcome, changes) = sync.ingest(stored, now: nowMs)
        var actions: [Action] = changes.isEmpty ? [] : [.syncChanges(changes)]
        switch outcome {
        case .accepted:
            counters.boardPackets.add(.accepted)
            actions.append(.mesh(.originateSigned(packet)))
            actions += copyToNostr(stored, deletedPost: nil, now: now)
            actions.append(.log(LogLine(.notice, "notice posted", [
                ("post.id", .string(Hex.encode(post.postID))), ("geohash", .string(post.geohash)), ("urgent", .bool(urgent)),
                ("expires_at_ms", .integer(Int64(clamping: post.expiresAt))),
            ])))
            return (.success(post), actions)
        case .duplicate: return (.failure(.alreadyPosted(Hex.encode(post.postID))), actions)
        case .rejected(let reason): return (.failure(.rejected(reason)), actions)
        }
    }

    /// Withdraws one of this bridge's live notices: a signed tombstone on the mesh and in the board store; its
    /// Nostr copy (if one was published) gets its kind 5.
    public mutating func withdrawNotice(postID: [UInt8], now: Double) -> (result: Result<Void, NoticeError>, actions: [Action]) {
        guard responder != nil else { return (.failure(.noBoard), []) }
        let nowMs = Self.ms(now)
        let own = configuration.keys.signingKey.publicKey.rawRepresentation
        guard sync.livePosts(now: nowMs).contains(where: { $0.postID == postID && $0.authorKey == own }) else {
            return (.failure(.unknown(Hex.encode(postID))), [])
        }
        let packet: MeshPacket
        do throws(NoticeError) {
            let tombstone: BoardTombstone
            do {
                tombstone = try BoardTombstone.signed(postID: postID, deletedAt: nowMs, key: configuration.keys.signingKey)
            } catch {
                throw .signing(error)
            }
            packet = try signedBoardPacket(.tombstone(tombstone), now: nowMs)
        } catch {
            return (.failure(error), [])
        }
        guard let stored = try? SyncPacket(packet) else { return (.failure(.rejected(.undecodable)), []) }
        let (outcome, changes) = sync.ingest(stored, now: nowMs)
        var actions: [Action] = changes.isEmpty ? [] : [.syncChanges(changes)]
        switch outcome {
        case .accepted(let deleted):
            counters.boardPackets.add(.accepted)
            actions.append(.mesh(.originateSigned(packet)))
            actions += copyToNostr(stored, deletedPost: deleted, now: now)
            actions.append(.log(LogLine(.notice, "notice withdrawn", [("post.id", .string(Hex.encode(postID)))])))
            return (.success(()), actions)
        case .duplicate: return (.failure(.unknown(Hex.encode(postID))), actions)
        case .rejected(let reason): return (.failure(.rejected(reason)), actions)
        }
    }

    /// This bridge's live notices, newest first.
    public func notices(now: Double) -> [BoardPost] {
        let own = configuration.keys.signingKey.publicKey.rawRepresentation
        return sync.livePosts(now: Self.ms(now)).filter { $0.authorKey == own }
    }

    /// A 0x23 packet from this bridge, packet-signed (MESH-WIRE §4.4) as the engine signs its own.
    private func signedBoardPacket(_ payload: BoardPayload, now: UInt64) throws(NoticeError) -> MeshPacket {
        do {
            return try MeshPacket(type: .boardPost, timestamp: now, sender: ownPeerID, payload: payload.encode())
                .signed(with: configuration.keys.signingKey)
        } catch {
            throw .packetSigning(error)
        }
    }
}
