import BotCrypto
public import BotSupport
public import Nostr

/// Why the kept fleet list was not loaded (the bridge starts without it and waits for its relays).
public enum FleetListFileError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreadable(String)
    case notAnEvent(String)
    case badSignature(String)

    public var description: String {
        switch self {
        case .unreadable(let reason): "kept fleet list unreadable: \(reason)"
        case .notAnEvent(let reason): "kept fleet list is not a Nostr event: \(reason)"
        case .badSignature(let reason): "kept fleet list does not verify: \(reason)"
        }
    }
}

/// The last good fleet list, kept across restarts as its signed event (`<data-dir>/fleet-list.json`, mode
/// 0600): verified again when loaded and offered like one from a relay, so a file from a key since removed
/// from the config, or for another site, is not applied. The executable hands one to the coordinator as its
/// ``FleetListKeeping`` store.
public final class FleetListFile: FleetListKeeping {
    public let dataDirectory: String

    public init(dataDirectory: String) { self.dataDirectory = dataDirectory }

    public func load() throws(FleetListFileError) -> NostrEvent? { try Self.load(dataDirectory: dataDirectory) }
    public func save(_ event: NostrEvent) throws(FileError) { try Self.save(event, dataDirectory: dataDirectory) }

    public static let fileName = "fleet-list.json"

    public enum Limits {
        /// Largest file read: one event frame.
        public static let maxBytes = RelayMessage.Limits.maxFrameBytes
    }

    public static func path(dataDirectory: String) -> String { FileIO.join(dataDirectory, fileName) }

    public static func save(_ event: NostrEvent, dataDirectory: String) throws(FileError) {
        try FileIO.writeAtomically(event.jsonBytes, to: path(dataDirectory: dataDirectory), mode: 0o600)
    }

    /// The kept event, verified; nil when there is none.
    public static func load(dataDirectory: String) throws(FleetListFileError) -> NostrEvent? {
        let path = path(dataDirectory: dataDirectory)
        guard FileIO.exists(path) else { return nil }
        let bytes: [UInt8]
        do {
            bytes = try FileIO.read(path, maxBytes: Limits.maxBytes)
        } catch {
            throw .unreadable("\(error)")
        }
        let unverified: UnverifiedEvent
        do {
            unverified = try UnverifiedEvent(json: String(decoding: bytes, as: UTF8.self), maxBytes: Limits.maxBytes)
        } catch {
            throw .notAnEvent("\(error)")
        }
        do {
            return try unverified.verified()
        } catch {
            throw .badSignature("\(error)")
        }
    }
}
