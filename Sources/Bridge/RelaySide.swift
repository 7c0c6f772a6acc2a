public import Nostr

/// What the bridge needs from the relay side (the executable adapts the live relay pool to it), so this
/// module never touches sockets.
public protocol BridgeRelayClient: Sendable {
    func publish(_ event: NostrEvent)
    /// The authors (lowercase hex) whose events the relay side verifies first once a relay's verification
    /// budget is spent (``BridgeCoordinator`` sends its established senders and the operator's allowed and
    /// verified Nostr keys). Verified all the same: this buys queue priority, never a skipped check.
    func setPriorityAuthors(_ authors: Set<String>)
}

/// The courier relays (issue 24: the DM relays drops live on, kept apart from the geohash relays).
public protocol CourierRelayClient: Sendable {
    func publish(_ event: NostrEvent)
    func subscribe(id: String, filter: NostrFilter)
    func unsubscribe(id: String)
}
