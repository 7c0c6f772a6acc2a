public import BotCrypto
public import BotSupport
public import Nostr

/// Why a configured operator key could not be read.
public enum OperatorKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    case notAKey(String)

    public var description: String {
        switch self {
        case .notAKey(let text): "'\(text)' is neither 64 hex characters nor an npub1… of a valid public key"
        }
    }
}

public enum OperatorKeys {
    /// Reads one operator key: 64 hex characters (either case) or `npub1…` (NIP-19).
    public static func parse(_ text: String) throws(OperatorKeyError) -> XOnlyPublicKey {
        let trimmed = text.trimmingSpaces
        if trimmed.hasPrefix("npub1") {
            guard let key = try? NIP19.publicKey(npub: trimmed) else { throw .notAKey(text) }
            return key
        }
        guard let bytes = try? Hex.decode(trimmed.lowercased(), expectedCount: 32),
            let key = try? XOnlyPublicKey(bytes: bytes)
        else { throw .notAKey(text) }
        return key
    }

    /// The secret key file a bridge that publishes the fleet list holds (64 hex characters, mode 0600).
    public static let secretFileName = "operator.key"
}

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

/// What the coordinator needs for fleet moderation: whose lists, which site, and the operator secret key when this bridge publishes its console's blocks (``OperatorKeys/secretFileName``).
public struct FleetSettings: Sendable {
    public var site: String
    public var operators: Set<XOnlyPublicKey>
    /// The operator key this bridge signs with (one of ``operators``), or nil: it only follows.
    public var publisher: SchnorrSecretKey?

    public init(site: String, operators: Set<XOnlyPublicKey>, publisher: SchnorrSecretKey?) {
        self.site = site
        self.operators = operators
        self.publisher = publisher
    }

    /// The relay subscription for the site's lists by the operator keys (no `since`: a replaceable list may
    /// be older than any lookback, and relays keep only the newest per key and site).
    public var filter: NostrFilter {
        NostrFilter(authors: operators.map(\.hex).sorted(), kinds: [FleetList.kind], tags: ["d": [site]])
    }
}
