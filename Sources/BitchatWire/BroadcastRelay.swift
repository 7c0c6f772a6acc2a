/// MESH-WIRE §7.5, iOS `RelayController`'s row for broadcasts other than fragments and voice: the TTL limit a
/// relayed broadcast keeps, from `cap` = min(received TTL, 7), the relaying node's degree (links) and the
/// packet's priority P (7 for announces and urgent board posts, 6 for the rest). The relay goes out with
/// limit − 1. One rule for the mesh engine and the board's relay decision (BOARD.md §7).
public enum BroadcastRelay {
    /// iOS `highDegreeThreshold`: at this many links and more, broadcasts are clamped harder.
    public static let highDegree = 6

    /// Degree ≤ 2: `cap`; degree ≥ ``highDegree``: max(2, min(cap, 5)); otherwise max(2, min(cap, P)).
    public static func limit(cap: UInt8, degree: Int, priority: UInt8) -> UInt8 {
        if degree <= 2 { return cap }
        if degree >= highDegree { return max(2, min(cap, 5)) }
        return max(2, min(cap, priority))
    }
}
