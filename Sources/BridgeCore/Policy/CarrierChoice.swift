public import BitchatWire
import BotCrypto
public import Nostr

/// Which bridge on an island carries an event: rendezvous (highest-random-weight) hashing over the
/// island's bridges.
///
/// Several bridges on one island hear the same relay event. Holding back until another bridge's copy is
/// heard fails under radio loss (a lost copy means a second one: 15 of 50 channel messages went onto one
/// island twice at 20 % loss). Instead every bridge decides from what all of them already know — the
/// event id and the island's bridge peer IDs from their announces — so they agree without hearing each
/// other's copies: the weight of bridge `p` for event `e` is SHA-256(`e` ‖ `p`) (32 + 8 bytes), and the
/// bridge with the highest weight carries it. The choice spreads events evenly, and when a bridge leaves
/// only the events it was chosen for move (each to the next-highest weight), which is what the handover
/// in ``BridgeRouter`` relies on.
public enum CarrierChoice {
    /// The carrier of `event` among `bridges` (nil when empty); the same on every bridge with the same set.
    public static func carrier(for event: EventID, among bridges: some Collection<MeshPeerID>) -> MeshPeerID? {
        var best: (peer: MeshPeerID, weight: [UInt8])?
        for peer in bridges {
            let weight = self.weight(event, peer)
            guard let current = best else {
                best = (peer, weight)
                continue
            }
            // Equal weights (a SHA-256 collision) go to the lower peer ID, so the set's order never matters.
            if current.weight.lexicographicallyPrecedes(weight) || (current.weight == weight && peer < current.peer) {
                best = (peer, weight)
            }
        }
        return best?.peer
    }

    /// SHA-256(event id ‖ peer id), compared byte by byte.
    static func weight(_ event: EventID, _ peer: MeshPeerID) -> [UInt8] {
        SHA256.hash(event.bytes + peer.bytes)
    }
}
