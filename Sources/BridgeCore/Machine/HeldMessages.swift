public import BotSupport
public import BitchatWire
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
        /// A mesh-only phone's deposit (its own signed event), released onto the relays as it would have been.
        case deposit(NostrEvent, depositor: MeshPeerID)

        /// The id the moderation log and the console name it by: the event id hex, or the mesh stable ID.
        public var id: String {
            switch self {
            case .channelEvent(let event), .deposit(let event, _): event.id.hex
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

extension HeldMessages.Held {
    /// The form the executor keeps on disk (``HeldMessages`` across a restart): a channel event as its signed
    /// NIP-01 JSON (verified again when read back), a mesh line as its fields.
    public var jsonValue: JSONValue {
        switch self {
        case .channelEvent(let event):
            return .object([("kind", .string("channel_event")), ("event", .string(event.json))])
        case .deposit(let event, let depositor):
            return .object([("kind", .string("deposit")), ("event", .string(event.json)), ("depositor", .string(depositor.hex))])
        case .meshMessage(let message, let senderKey):
            return .object([
                ("kind", .string("mesh_message")), ("sender", .string(message.sender.hex)), ("nickname", .string(message.nickname)),
                ("text", .string(message.text)), ("timestamp", .integer(Int64(clamping: message.timestamp))),
                ("stable_id", .string(message.stableID)), ("ttl", .integer(Int64(message.ttl))),
                ("noise_key", message.noisePublicKey.map { .string(Hex.encode($0)) } ?? .null), ("sender_key", .string(senderKey)),
            ])
        }
    }

    /// What ``jsonValue`` wrote, or nil for a row that no longer reads (a damaged row is dropped, never released).
    public init?(json: JSONValue) {
        switch json["kind"]?.stringValue {
        case "channel_event":
            guard let text = json["event"]?.stringValue, let event = try? UnverifiedEvent(json: text).verified() else { return nil }
            self = .channelEvent(event)
        case "deposit":
            guard let text = json["event"]?.stringValue, let event = try? UnverifiedEvent(json: text).verified(),
                let depositor = json["depositor"]?.stringValue.flatMap({ try? MeshPeerID(hex: $0) })
            else { return nil }
            self = .deposit(event, depositor: depositor)
        case "mesh_message":
            guard let senderHex = json["sender"]?.stringValue, let sender = try? MeshPeerID(hex: senderHex),
                let nickname = json["nickname"]?.stringValue, let text = json["text"]?.stringValue,
                let timestamp = json["timestamp"]?.integerValue, timestamp >= 0, let stableID = json["stable_id"]?.stringValue,
                let ttl = json["ttl"]?.integerValue, (0...255).contains(ttl), let senderKey = json["sender_key"]?.stringValue
            else { return nil }
            let noise = json["noise_key"]?.stringValue.flatMap { try? Hex.decode($0) }
            self = .meshMessage(
                MeshPublicMessage(
                    sender: sender, nickname: nickname, text: text, timestamp: UInt64(timestamp), stableID: stableID, ttl: UInt8(ttl),
                    noisePublicKey: noise),
                senderKey: senderKey)
        default:
            return nil
        }
    }
}
