public import BotSupport
import BitchatWire

/// What happened to a verified origin-TTL (direct) announce's claim on a link (``LinkBindings``).
public enum MeshLinkBindingEvent: String, CounterKey, CaseIterable {
    /// The peer became a direct peer of the link (an unbound point link, or room on a shared one).
    case bound
    /// A point link changed hands: the newcomer took it from the identity it was bound to (a phone that rotated its
    /// peer ID, as iOS `rebindLinkAfterVerifiedDirectAnnounce` allows).
    case rebound
    /// Refused: the link changed hands less than ``LinkBindings/Limits/rebindCooldownMs`` ago.
    case refusedCooldown = "refused_cooldown"
    /// Refused: the newcomer is bound to another link already (a replayed announce cannot steal a link).
    case refusedBoundElsewhere = "refused_bound_elsewhere"
    /// Refused: a shared link holds ``LinkBindings/Limits/maxPeersPerSharedLink`` direct peers already.
    case refusedFull = "refused_full"
}

/// Which peers are direct on which of our links, bound as both apps bind a link (APP-BEHAVIOUR §1, §4): a point link
/// (BLE) belongs to **one** identity — the first whose verified announce at origin TTL arrived on it — and changes
/// hands only as iOS lets it (`BLEService.rebindLinkAfterVerifiedDirectAnnounce`): to an identity bound nowhere else,
/// at most once per link per 60 s. A shared link (one connection to a radio hub's segment, where every member hears
/// every frame) holds up to ``Limits/maxPeersPerSharedLink`` direct peers; more are refused until one leaves.
///
/// Decision: the bridge binds only on a *verified* announce (iOS binds an unbound link on any TTL-7 announce before
/// its signature is checked); a refused newcomer is still a verified peer, only not a direct one — so no flood of
/// origin-TTL announces makes more than a bounded number of peers direct, and "direct" (which outranks the peer
/// table's caps for eviction) stays bounded by the links.
struct LinkBindings {
    enum Limits {
        /// iOS `TransportConfig.bleLinkRebindCooldownSeconds`.
        static let rebindCooldownMs: UInt64 = 60_000
        /// Direct peers on one shared link: a radio hub stands for the phones around one spot, which the apps would
        /// each meet on a link of their own; 32 is more than a test island or a demo holds, and bounds what a flood of
        /// origin-TTL announces can make direct there.
        static let maxPeersPerSharedLink = 32
    }

    /// What ``observe(_:on:now:)`` changed.
    enum Outcome: Equatable {
        /// Already direct on the link, or the link is unknown.
        case unchanged
        /// Newly direct on the link; `replaced` lost the link to it (a point link changing hands).
        case bound(replaced: MeshPeerID?)
        case refused(MeshLinkBindingEvent)
    }

    private var kinds: [MeshLinkID: MeshLinkKind] = [:]
    private var peersOn: [MeshLinkID: Set<MeshPeerID>] = [:]
    private var linksOf: [MeshPeerID: Set<MeshLinkID>] = [:]
    private var lastRebind: [MeshLinkID: UInt64] = [:]

    mutating func up(_ link: MeshLinkID, kind: MeshLinkKind) { kinds[link] = kind }

    /// The link went down: the peers that are now direct nowhere.
    mutating func down(_ link: MeshLinkID) -> [MeshPeerID] {
        kinds[link] = nil
        lastRebind[link] = nil
        return (peersOn.removeValue(forKey: link) ?? []).sorted().filter { unbind($0, from: link) }
    }

    func peers(on link: MeshLinkID) -> Set<MeshPeerID> { peersOn[link] ?? [] }
    func links(of peer: MeshPeerID) -> Set<MeshLinkID> { linksOf[peer] ?? [] }
    func isDirect(_ peer: MeshPeerID) -> Bool { linksOf[peer] != nil }

    /// A verified announce at origin TTL from `peer` arrived on `link`.
    mutating func observe(_ peer: MeshPeerID, on link: MeshLinkID, now: UInt64) -> Outcome {
        guard let kind = kinds[link], peersOn[link]?.contains(peer) != true else { return .unchanged }
        let current = peersOn[link] ?? []
        var replaced: MeshPeerID?
        switch kind {
        case .shared:
            guard current.count < Limits.maxPeersPerSharedLink else { return .refused(.refusedFull) }
        case .point:
            if let owner = current.first {
                guard !isDirect(peer) else { return .refused(.refusedBoundElsewhere) }
                if let last = lastRebind[link], now < last + Limits.rebindCooldownMs { return .refused(.refusedCooldown) }
                lastRebind[link] = now
                peersOn[link] = []
                _ = unbind(owner, from: link)
                replaced = owner
            }
        }
        peersOn[link, default: []].insert(peer)
        linksOf[peer, default: []].insert(link)
        return .bound(replaced: replaced)
    }

    /// `peer` left the table: it is direct nowhere.
    mutating func remove(_ peer: MeshPeerID) {
        for link in linksOf.removeValue(forKey: peer) ?? [] { peersOn[link]?.remove(peer) }
    }

    /// Takes `link` from `peer`'s set; true when it is direct on no link any more.
    private mutating func unbind(_ peer: MeshPeerID, from link: MeshLinkID) -> Bool {
        linksOf[peer]?.remove(link)
        guard linksOf[peer]?.isEmpty ?? true else { return false }
        linksOf[peer] = nil
        return true
    }
}
