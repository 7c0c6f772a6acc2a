public import BitchatWire

/// BOARD.md §7: whether and with what TTL a received board packet is relayed.
///
/// Ours (the Android PR rule): only an *accepted* post or tombstone is relayed — duplicates only serve
/// someone re-wrapping captured posts, and phones that missed a post get it through sync. TTL follows iOS
/// `RelayController`'s "other broadcasts" row (``BroadcastRelay``, the mesh engine's rule too):
/// `cap = min(TTL, 7)`, none when cap ≤ 1, P = 7 for urgent posts (the first flags TLV,
/// `BoardPayload.urgentFlag`) and 6 for the rest; the new TTL is limit − 1.
public enum BoardRelay {
    public enum Limits {
        /// P for urgent posts / everything else at degree 3…5.
        public static let urgentLimit: UInt8 = 7
        public static let ordinaryLimit: UInt8 = 6
    }

    /// The TTL to relay with, or nil when the packet is not relayed.
    public static func relayTTL(for packet: MeshPacket, outcome: BoardIngestOutcome, degree: Int) -> UInt8? {
        guard outcome.isAccepted, packet.type == .boardPost else { return nil }
        let cap = min(packet.ttl, MeshPacket.Limits.originTTL)
        guard cap > 1 else { return nil }
        let priority = BoardPayload.urgentFlag(in: packet.payload) ? Limits.urgentLimit : Limits.ordinaryLimit
        return BroadcastRelay.limit(cap: cap, degree: degree, priority: priority) - 1
    }
}
