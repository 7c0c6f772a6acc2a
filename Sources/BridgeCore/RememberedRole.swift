public import Nostr

/// Why the bridge remembers an event id across restarts (``BridgeRouter/Action/remember(_:_:)``): it published
/// the event, broadcast it on the mesh, or learned that its island has it already (another bridge's carrier, or
/// the radio copy) — so that a relay replaying its stored events to the restarted bridge changes nothing. The raw
/// value is the durable store's column value; a ``radioCopy`` row holds a mesh message's stable ID (16 bytes),
/// the others an event id.
public enum RememberedRole: Int64, Sendable {
    case published = 1
    case rebroadcast = 2
    case learned = 3
    /// The island heard this public mesh message (loop rule 3): a rendezvous event naming it is its copy.
    case radioCopy = 4
}

/// The event ids an earlier run left in the store, by role (``BridgeRouter/init(settings:ownKeys:rendezvousKey:remembered:channelKey:presenceSeed:judge:clockOrigin:)``).
public struct RememberedEvents: Sendable {
    public var published: [EventID]
    public var rebroadcast: [EventID]
    public var learned: [EventID]
    /// Stable IDs (hex) of the public mesh messages the island heard.
    public var radioCopies: [String]

    public init(published: [EventID] = [], rebroadcast: [EventID] = [], learned: [EventID] = [], radioCopies: [String] = []) {
        self.published = published
        self.rebroadcast = rebroadcast
        self.learned = learned
        self.radioCopies = radioCopies
    }
}
