/// The outer packet type byte (MESH-WIRE §3.1). Unknown values decode and relay unchanged.
public struct MessageType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let announce = MessageType(rawValue: 0x01)
    public static let message = MessageType(rawValue: 0x02)
    public static let leave = MessageType(rawValue: 0x03)
    public static let courierEnvelope = MessageType(rawValue: 0x04)
    public static let noiseHandshake = MessageType(rawValue: 0x10)
    public static let noiseEncrypted = MessageType(rawValue: 0x11)
    public static let fragment = MessageType(rawValue: 0x20)
    public static let requestSync = MessageType(rawValue: 0x21)
    public static let fileTransfer = MessageType(rawValue: 0x22)
    public static let boardPost = MessageType(rawValue: 0x23)
    public static let prekeyBundle = MessageType(rawValue: 0x24)
    public static let groupMessage = MessageType(rawValue: 0x25)
    public static let ping = MessageType(rawValue: 0x26)
    public static let pong = MessageType(rawValue: 0x27)
    public static let nostrCarrier = MessageType(rawValue: 0x28)
    public static let voiceFrame = MessageType(rawValue: 0x29)
    public static let announceV2 = MessageType(rawValue: 0x2C)

    private static let names: [UInt8: String] = [
        0x01: "announce", 0x02: "message", 0x03: "leave", 0x04: "courierEnvelope", 0x10: "noiseHandshake",
        0x11: "noiseEncrypted", 0x20: "fragment", 0x21: "requestSync", 0x22: "fileTransfer", 0x23: "boardPost",
        0x24: "prekeyBundle", 0x25: "groupMessage", 0x26: "ping", 0x27: "pong", 0x28: "nostrCarrier",
        0x29: "voiceFrame", 0x2C: "announceV2",
    ]

    /// The iOS name (`announce`, `message`, …) or nil for an unknown type.
    public var name: String? { Self.names[rawValue] }

    /// Looks a type up by its name.
    public init?(name: String) {
        guard let entry = Self.names.first(where: { $0.value == name }) else { return nil }
        rawValue = entry.key
    }

    /// Noise types are the only ones padded on the air (MESH-WIRE §2.6).
    public var isNoise: Bool { self == .noiseHandshake || self == .noiseEncrypted }

    public var description: String { name ?? "0x" + String(rawValue, radix: 16) }
}
