import BotSupport

/// The loop-prevention rules every bridge must keep so that several bridges on one site (and the phones'
/// own bridging) deliver each message at most once per island and never echo an uplink (NOSTR-GEO §8.9):
///
/// 1. An event learned from a mesh broadcast (`fromBridge` / `fromGateway` sent by another bridge) is
///    never published and never rebroadcast: the island already has it.
/// 2. An event this bridge published (its own, or a deposit it uplinked) is never rebroadcast.
/// 3. An event is rebroadcast at most once, and not when the island already has the radio copy
///    (the `m` hint's stable ID matches a public mesh message heard on the radio).
/// 4. Events signed by one of the bridge's own keys are ignored (checked by the caller with
///    ``isOwnKey(_:)``, so restarts are safe: the keys are derived, not remembered).
///
/// Each set is bounded (512 ids, the phones' `maxTrackedEventIDs`); the published and rebroadcast sets are
/// persisted as they grow, the learned set and the radio copies at a graceful stop (``RecentEventStore``), so a
/// restart does not re-forward what was already forwarded, nor what its island already had when the relay
/// replays it.
public struct LoopGuard<ID: Hashable & Sendable, Key: Hashable & Sendable>: Sendable {
    public enum Limits {
        /// Ids remembered per rule, as phones bound theirs (`maxTrackedEventIDs`).
        public static var maxTrackedEventIDs: Int { 512 }
        /// Radio stable IDs remembered (phones: `maxTrackedRadioAliases` = the mesh timeline cap).
        public static var maxTrackedRadioCopies: Int { 1337 }
    }

    private var learnedFromMesh = BoundedSet<ID>(capacity: Limits.maxTrackedEventIDs)
    private var published = BoundedSet<ID>(capacity: Limits.maxTrackedEventIDs)
    private var rebroadcast = BoundedSet<ID>(capacity: Limits.maxTrackedEventIDs)
    private var radioCopies = BoundedSet<String>(capacity: Limits.maxTrackedRadioCopies)
    private let ownKeys: Set<Key>

    public init(ownKeys: Set<Key>) {
        self.ownKeys = ownKeys
    }

    public func isOwnKey(_ key: Key) -> Bool { ownKeys.contains(key) }

    /// Rule 1: remember an event heard as a mesh broadcast carrier.
    public mutating func recordLearnedFromMesh(_ id: ID) { learnedFromMesh.insert(id) }

    /// Rule 2: remember an event we published (before it is sent, so a crash cannot re-forward it).
    public mutating func recordPublished(_ id: ID) { published.insert(id) }

    /// Rule 3: remember an event we broadcast on the mesh.
    public mutating func recordRebroadcast(_ id: ID) { rebroadcast.insert(id) }

    /// Rule 3: remember the stable ID of a public message heard on the radio.
    public mutating func recordRadioCopy(stableID: String) { radioCopies.insert(stableID) }

    public func wasLearnedFromMesh(_ id: ID) -> Bool { learnedFromMesh.contains(id) }
    /// The events learned from the mesh, oldest first (kept across a graceful restart).
    public var learned: [ID] { learnedFromMesh.elementsOldestFirst }
    /// The radio copies' stable IDs, oldest first (kept across a graceful restart).
    public var radioCopiesHeard: [String] { radioCopies.elementsOldestFirst }
    /// Whether the island has the radio copy named by an `m` hint.
    public func heardRadioCopy(_ stableID: String) -> Bool { radioCopies.contains(stableID) }
    public func wasPublished(_ id: ID) -> Bool { published.contains(id) }
    public func wasRebroadcast(_ id: ID) -> Bool { rebroadcast.contains(id) }

    /// May this event (a deposit, or a mesh message for the mirror) be published to the relays?
    public func mayPublish(_ id: ID, signer: Key) -> Bool {
        !ownKeys.contains(signer) && !learnedFromMesh.contains(id) && !published.contains(id)
    }

    /// May this relay event be broadcast on the mesh? `radioStableID` is the stable ID named by its
    /// `m` hint, if it has a well-formed one.
    public func mayRebroadcast(_ id: ID, signer: Key, radioStableID: String?) -> Bool {
        if ownKeys.contains(signer) || learnedFromMesh.contains(id) || published.contains(id) || rebroadcast.contains(id) {
            return false
        }
        if let radioStableID, radioCopies.contains(radioStableID) { return false }
        return true
    }
}
