public import BitchatWire
public import Mesh
import BotCrypto

/// The verified mesh peers as the bridge needs them, kept from the engine's peer reports: each one's Noise key
/// (its fingerprint is the spam filter's sender key, its identity the block list's) and signing key (a board
/// post's author key traced back to a peer), and which of them announce the gateway or the bridge capability —
/// the other bridges of this island, who share its downlink (``AirtimeMachine/setIslandBridges(own:gateways:rendezvous:now:)``).
/// Bounded by the engine's peer table: every removal there is a ``MeshAction/peerLost(_:reason:)``, and a
/// dropped report is repaired by ``MeshAction/peersResync(_:)``.
public struct MeshPeers: Sendable {
    public private(set) var noiseKeys: [MeshPeerID: [UInt8]] = [:]
    public private(set) var signingKeys: [MeshPeerID: [UInt8]] = [:]
    public private(set) var gateways: Set<MeshPeerID> = []
    public private(set) var rendezvous: Set<MeshPeerID> = []
    /// Each peer's nickname, and how many peers use each (a persona's nickname must be no one else's).
    private var nicknames: [MeshPeerID: String] = [:]
    private var nicknameUses: [String: Int] = [:]

    public init() {}

    /// Whether a verified peer announces `nickname`.
    public func uses(nickname: String) -> Bool { nicknameUses[nickname] != nil }

    private mutating func setNickname(_ nickname: String?, of id: MeshPeerID) {
        if let old = nicknames[id] {
            nicknameUses[old, default: 1] -= 1
            if nicknameUses[old] == 0 { nicknameUses[old] = nil }
        }
        nicknames[id] = nickname
        if let nickname { nicknameUses[nickname, default: 0] += 1 }
    }

    public var count: Int { noiseKeys.count }

    /// A peer verified (or changed). Any verified peer counts for the island, direct or relayed: its announce
    /// crossed this island's radio, so its broadcasts reach the same phones. True when the island changed.
    public mutating func verified(_ peer: MeshPeer) -> Bool {
        noiseKeys[peer.id] = peer.noisePublicKey
        signingKeys[peer.id] = peer.signingPublicKey.rawRepresentation
        setNickname(peer.nickname, of: peer.id)
        let capabilities = peer.capabilities ?? []
        return setIsland(
            gateways: capabilities.contains(.gateway) ? gateways.union([peer.id]) : gateways.subtracting([peer.id]),
            rendezvous: capabilities.contains(.bridge) ? rendezvous.union([peer.id]) : rendezvous.subtracting([peer.id]))
    }

    /// A peer left the table. True when the island changed.
    public mutating func lost(_ id: MeshPeerID) -> Bool {
        noiseKeys[id] = nil
        signingKeys[id] = nil
        setNickname(nil, of: id)
        return setIsland(gateways: gateways.subtracting([id]), rendezvous: rendezvous.subtracting([id]))
    }

    /// The engine's whole table (after dropped reports): it is the truth. True when the island changed.
    public mutating func resync(_ peers: [MeshPeer]) -> Bool {
        noiseKeys = Dictionary(peers.map { ($0.id, $0.noisePublicKey) }, uniquingKeysWith: { $1 })
        signingKeys = Dictionary(peers.map { ($0.id, $0.signingPublicKey.rawRepresentation) }, uniquingKeysWith: { $1 })
        nicknames = [:]
        nicknameUses = [:]
        for peer in peers { setNickname(peer.nickname, of: peer.id) }
        return setIsland(
            gateways: Set(peers.filter { ($0.capabilities ?? []).contains(.gateway) }.map(\.id)),
            rendezvous: Set(peers.filter { ($0.capabilities ?? []).contains(.bridge) }.map(\.id)))
    }

    /// The peer whose signing key is `key` (a board post's author), if one is known.
    public func peer(signingKey key: [UInt8]) -> MeshPeerID? { signingKeys.first { $0.value == key }?.key }

    private mutating func setIsland(gateways: Set<MeshPeerID>, rendezvous: Set<MeshPeerID>) -> Bool {
        guard gateways != self.gateways || rendezvous != self.rendezvous else { return false }
        self.gateways = gateways
        self.rendezvous = rendezvous
        return true
    }
}
