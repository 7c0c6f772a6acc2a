public import BitchatWire
public import BotCrypto
public import MeshSync

/// Identifies one link (one BLE connection, one TCP connection to a radio hub, one simulated edge) within a node.
public struct MeshLinkID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "link\(rawValue)" }
    public static func < (lhs: MeshLinkID, rhs: MeshLinkID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Who this node is on the mesh. Plain values: the caller decides where keys come from.
public struct MeshIdentity: Sendable {
    /// X25519 static public key (32 bytes): announce TLV 0x02, and the source of the peer ID.
    public let noisePublicKey: [UInt8]
    /// Ed25519 key that signs announces, messages and leaves.
    public let signingKey: Ed25519PrivateKey
    public var nickname: String
    /// Advertised in TLV 0x05; nil omits the TLV. Advertise only what is implemented (§4.7.3).
    public var capabilities: PeerCapabilities?
    /// TLV 0x06 rendezvous cell, sent with the `bridge` capability.
    public var bridgeGeohash: String?
    public let peerID: MeshPeerID

    public init(
        noisePublicKey: [UInt8],
        signingKey: Ed25519PrivateKey,
        nickname: String,
        capabilities: PeerCapabilities? = PeerCapabilities(),
        bridgeGeohash: String? = nil
    ) {
        self.noisePublicKey = noisePublicKey
        self.signingKey = signingKey
        self.nickname = nickname
        self.capabilities = capabilities
        self.bridgeGeohash = bridgeGeohash
        self.peerID = MeshPeerID(noisePublicKey: noisePublicKey)
    }
}

/// A peer whose announce verified.
public struct MeshPeer: Sendable, Equatable {
    public let id: MeshPeerID
    public var nickname: String
    public let noisePublicKey: [UInt8]
    public let signingPublicKey: Ed25519PublicKey
    public var capabilities: PeerCapabilities?
    public var bridgeGeohash: String?
    /// ms of the last verified traffic.
    public var lastSeen: UInt64
    /// True when this peer is a direct peer of one of our links (its announce verified there at TTL 7).
    public var isDirect: Bool

    public init(
        id: MeshPeerID, nickname: String, noisePublicKey: [UInt8], signingPublicKey: Ed25519PublicKey,
        capabilities: PeerCapabilities?, bridgeGeohash: String?, lastSeen: UInt64, isDirect: Bool
    ) {
        self.id = id
        self.nickname = nickname
        self.noisePublicKey = noisePublicKey
        self.signingPublicKey = signingPublicKey
        self.capabilities = capabilities
        self.bridgeGeohash = bridgeGeohash
        self.lastSeen = lastSeen
        self.isDirect = isDirect
    }
}

/// A verified public chat message.
public struct MeshPublicMessage: Sendable, Equatable {
    public let sender: MeshPeerID
    public let nickname: String
    public let text: String
    public let timestamp: UInt64
    /// iOS `MeshMessageIdentity` (§5.3).
    public let stableID: String
    /// TTL as received (7 = first hop).
    public let ttl: UInt8
    /// The sender's Noise static key (its fingerprint is the spam filter's sender key), from the live table
    /// or the sender's pin; nil only where a caller builds a message without one.
    public let noisePublicKey: [UInt8]?

    public init(
        sender: MeshPeerID, nickname: String, text: String, timestamp: UInt64, stableID: String, ttl: UInt8,
        noisePublicKey: [UInt8]? = nil
    ) {
        self.noisePublicKey = noisePublicKey
        self.sender = sender
        self.nickname = nickname
        self.text = text
        self.timestamp = timestamp
        self.stableID = stableID
        self.ttl = ttl
    }
}

/// A Nostr carrier accepted by the rules of MESH-WIRE §9.2 (uplinks: directed to us and signed; downlinks: broadcast).
public struct MeshCarrier: Sendable, Equatable {
    public let sender: MeshPeerID
    public let payload: NostrCarrierPayload
    public let timestamp: UInt64
    /// The packet carries a signature that verifies under the sender's announced (or pinned) signing key.
    /// Required for uplinks; for broadcast downlinks it is what Android's open carrier change (PR #770) would
    /// require of every carrier, and what the bridge's own broadcasts always have (issue 16 part 4).
    public let packetSigned: Bool

    public init(sender: MeshPeerID, payload: NostrCarrierPayload, timestamp: UInt64, packetSigned: Bool = false) {
        self.sender = sender
        self.payload = payload
        self.timestamp = timestamp
        self.packetSigned = packetSigned
    }
}

/// What a link joins, which decides how many peers may be direct on it (``MeshPeerEngine`` link bindings).
public enum MeshLinkKind: String, Sendable, Equatable {
    /// Two devices: a BLE connection (either GATT role), a simulated edge. Both apps bind such a link to one
    /// identity (APP-BEHAVIOUR §1, §4).
    case point
    /// A shared medium: one connection to a radio hub's segment, on which every member hears every frame.
    case shared
}

/// What the engine is told.
public enum MeshInput: Sendable {
    case linkUp(MeshLinkID, mtu: Int, kind: MeshLinkKind = .point)
    case linkDown(MeshLinkID)
    case frame(MeshLinkID, [UInt8])
    /// The engine's own work, due at ``MeshPeerEngine/nextDeadline()``: announce cadence, peer expiry, overdue
    /// relay verdicts, reassembly timeouts, sync rounds. Harmless at any other time (nothing due, nothing done).
    case tick
    /// Originate a signed public message.
    case sendPublicMessage(String)
    /// Originate a signed leave (on shutdown).
    case sendLeave
    /// Originate a signed announce now.
    case sendAnnounce
    /// Originate any packet (sender and timestamp are set by the engine; signed if `sign`).
    case originate(MeshPacket, sign: Bool)
    /// The owner's verdict on a public message it was given (``MeshAction/publicMessage(_:)``), with
    /// ``MeshPeerEngine/Configuration/gatePublicRelays`` on: `relay` sends the held copy on, otherwise it
    /// is withheld. Remembered by stable ID; a verdict for a message no longer held only updates that memory.
    case relayVerdict(stableID: String, relay: Bool)
    /// The owner's durable pins (its stranger cache) replace the ones loaded before; pins of peers in the
    /// live table stay (``PinBook``).
    case replacePins([MeshPin])
    /// The owner's cache forgot these identities: each one's next announce is first contact again.
    case forgetPins([MeshPeerID])
    /// Send a packet signed elsewhere (the bridge's per-author personas, a board post) on every link, at `ttl` (≤ 7)
    /// after `delayMs`. Its sender counts as ours for ``MeshPeerEngine/Limits/ownSenderWindowMs``, so its echoes are
    /// dropped like our own, never taken for a peer's.
    case originateSigned(MeshPacket, ttl: UInt8 = MeshPacket.Limits.originTTL, delayMs: UInt64 = 0)
    /// Gossip sync (``MeshPeerEngine/Configuration/sync`` set): send the REQUEST_SYNC the owner built for a
    /// ``MeshAction/syncRoundDue(_:)`` — signed, TTL 0, unpadded, addressed to `peer`, on the links bound to it.
    case sendSyncRequest(peer: MeshPeerID, payload: RequestSyncPayload)
    /// The courier gateway: `envelope` to `peer` as a directed 0x04 (TTL 7, signed) on the links where it is a direct
    /// peer, never relayed on toward it; answered by ``MeshAction/courierSent(ref:delivered:)``.
    case sendCourier(to: MeshPeerID, envelope: [UInt8], ref: String)
    /// Gossip sync: the responder's reply frames for a ``MeshAction/syncRequest(link:_:)`` — sent at once on
    /// `link`, as they are (cut into fragments, which inherit TTL 0 and RSR, when one exceeds the MTU).
    case sendSyncReplies(link: MeshLinkID, frames: [[UInt8]])
    /// Gossip sync: the owner's board store accepted this 0x23 packet (``MeshAction/boardPacket(_:link:)``),
    /// so it is relayed (BOARD.md §7: only accepted posts; TTL by degree, urgent posts P = 7).
    case relayBoard(MeshPacket, from: MeshLinkID)
    /// Gossip sync: a 0x23 packet the owner's board store accepted from elsewhere than this mesh (the bridge's
    /// Nostr carriage of another island's board): sent on every link at TTL 7, every other field as it came
    /// (its author's signatures stay valid, BOARD.md §0.4); its dedup key is remembered, so the copy phones
    /// relay back is not taken again.
    case broadcastBoard(MeshPacket)
}

/// What the engine asks its driver to do or tells it happened.
public enum MeshAction: Sendable, Equatable {
    /// Write `frame` on `link` after `delayMs` (relay jitter, fragment pacing).
    case transmit(link: MeshLinkID, frame: [UInt8], delayMs: UInt64)
    /// A peer verified for the first time or changed nickname/capabilities/cell.
    case peerVerified(MeshPeer)
    /// A peer left the table: a verified leave, silence, or eviction by the table's bound. Every removal is
    /// reported, so consumers that keep per-peer state stay bounded.
    case peerLost(MeshPeerID, reason: MeshPeerLossReason)
    case publicMessage(MeshPublicMessage)
    case carrier(MeshCarrier)
    /// A verified announce refused because its keys conflict with the pin of its peer ID: `announced` holds
    /// the keys it tried. Nothing was refreshed.
    case pinRefused(announced: MeshPin)
    /// Gossip sync: a REQUEST_SYNC arrived on `link`, with the link's bound peer and the sender's pinned key,
    /// for the owner's ``SyncResponder``; its answer comes back as ``MeshInput/sendSyncReplies(link:frames:)``.
    case syncRequest(link: MeshLinkID, SyncRequestInput)
    /// Gossip sync: a request round is due (``SyncRequester``); the owner builds the payload from its stores
    /// (``SyncRequester/payload(types:gossip:board:now:)``) and submits ``MeshInput/sendSyncRequest(peer:payload:)``.
    /// The RSR window for `peer` is already open.
    case syncRoundDue(SyncRound)
    /// Gossip sync: a packet that verified (a broadcast announce, a broadcast public message) for the owner's
    /// sync stores. Messages come after their ``publicMessage(_:)``, so the owner may keep only what it passed.
    case syncStore(MeshPacket)
    /// Gossip sync: a broadcast announce or public message this node sent (its own, or one signed elsewhere), for the
    /// owner's sync store: phones keep their own sends, so the owner's REQUEST_SYNC filter must cover them.
    case originated(MeshPacket)
    /// Gossip sync: a board packet (0x23), not relayed by the engine; the owner ingests it (decode, inner
    /// signature, store rules) and answers ``MeshInput/relayBoard(_:from:)`` when it was accepted.
    case boardPacket(MeshPacket, link: MeshLinkID)
    /// Without gossip sync: a broadcast board packet (0x23) heard for the first time, relayed or not by the
    /// engine's media rule (MESH-WIRE §7.5). Only for showing it, as a phone's board does; whether it is a
    /// valid post (the inner signature, BOARD.md §4) is the owner's check.
    case boardHeard(MeshPacket)
    /// The whole live table, sent after a ``peerVerified(_:)`` or ``peerLost(_:reason:)`` was dropped because
    /// the owner fell behind (``MeshNode/Limits/actionBuffer``): the owner replaces what it keeps per peer with
    /// it. Actions after it apply on top, as usual.
    case peersResync([MeshPeer])
    /// A courier envelope (0x04) addressed to us, its packet signature verified against its sender's key and its
    /// sender a direct peer of the link it came on (COURIER.md §2.5): a deposit for the owner's courier gateway.
    case courierDeposit(from: MeshPeerID, envelope: [UInt8])
    /// The answer to ``MeshInput/sendCourier(to:envelope:ref:)``: `delivered` when a link where the peer is a direct
    /// peer took the packet; false when it is direct on no link (or the packet could not be signed or cut).
    case courierSent(ref: String, delivered: Bool)

    /// True for the actions that change the set of live peers (what ``peersResync(_:)`` repairs).
    public var changesPeers: Bool {
        switch self {
        case .peerVerified, .peerLost: true
        default: false
        }
    }
}

