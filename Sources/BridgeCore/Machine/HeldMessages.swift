public import Mesh
public import Nostr

/// Hidden messages kept so the operator can release one (the console's Release, `bitchat-bridge modlog release`),
/// both ways: a channel event from the relays (released onto the mesh through the normal path) and a public mesh
/// message (released onto Nostr as the bridge's mirror line). The newest ``Limits/maxHeld`` by message id, oldest
/// forgotten first; an older one cannot be released, and the ±900 s window refuses a channel event soon anyway.
public struct HeldMessages: Sendable {
    public enum Limits {
        /// 1,000 messages of ≤ 2 KB: a few MB at most.
        public static let maxHeld = 1_000
    }

    /// What was hidden, as the path that releases it needs it.
    public enum Held: Sendable, Equatable {
        case channelEvent(NostrEvent)
        case meshMessage(MeshPublicMessage, senderKey: String)

        /// The id the moderation log and the console name it by: the event id hex, or the mesh stable ID.
        public var id: String {
            switch self {
            case .channelEvent(let event): event.id.hex
            case .meshMessage(let message, _): message.stableID
            }
        }
    }

    private var items: [String: Held] = [:]
    private var order: [String] = []

    public init() {}

    public var count: Int { items.count }

    /// Keeps `item` under its id; a second copy changes nothing.
    public mutating func hold(_ item: Held) {
        let id = item.id
        guard items[id] == nil else { return }
        items[id] = item
        order.append(id)
        if order.count > Limits.maxHeld { items[order.removeFirst()] = nil }
    }

    public func item(_ id: String) -> Held? { items[id] }

    public mutating func forget(_ id: String) {
        guard items.removeValue(forKey: id) != nil else { return }
        order.removeAll { $0 == id }
    }
}
