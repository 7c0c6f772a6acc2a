public import Nostr

/// Hidden channel events kept so the operator can release one (the console's Release): the newest
/// ``Limits/maxHeld`` by event id, oldest forgotten first. An older one cannot be released, and the ±900 s
/// window refuses it soon anyway.
public struct HeldMessages: Sendable {
    public enum Limits {
        /// 1,000 events of ≤ 2 KB: a few MB at most.
        public static let maxHeld = 1_000
    }

    private var events: [String: NostrEvent] = [:]
    private var order: [String] = []

    public init() {}

    public var count: Int { events.count }

    /// Keeps `event` under its id hex (a second copy of a held one changes nothing).
    public mutating func hold(_ event: NostrEvent) {
        let id = event.id.hex
        guard events[id] == nil else { return }
        events[id] = event
        order.append(id)
        if order.count > Limits.maxHeld { events[order.removeFirst()] = nil }
    }

    public func event(_ id: String) -> NostrEvent? { events[id] }

    public mutating func forget(_ id: String) {
        guard events.removeValue(forKey: id) != nil else { return }
        order.removeAll { $0 == id }
    }
}
