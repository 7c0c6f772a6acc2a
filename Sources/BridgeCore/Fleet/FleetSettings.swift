public import BotCrypto
import BotSupport
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

/// What the coordinator needs for fleet moderation: whose lists, which site, and the operator secret key when this bridge publishes its console's blocks (``OperatorKeys/secretFileName``).
public struct FleetSettings: Sendable {
    public var site: String
    public var operators: Set<XOnlyPublicKey>
    /// The operator key this bridge signs with (one of ``operators``), or nil: it only follows.
    public var publisher: SchnorrSecretKey?

    /// The site key of the site records (issue 35), derived from ``publisher``: a stage that holds the operator key
    /// reads and makes the site's records; one that only follows applies the NIP-51 list alone.
    public var siteKey: SiteKey?

    public init(site: String, operators: Set<XOnlyPublicKey>, publisher: SchnorrSecretKey?) {
        self.site = site
        self.operators = operators
        self.publisher = publisher
        // HKDF over a 32-byte key cannot fail but for an OpenSSL allocation failure: then no site records (logged at start).
        self.siteKey = publisher.flatMap { try? SiteKey(operatorKey: $0, site: site) }
    }

    /// The relay subscription for the site's records: by the operator key this stage holds (records sealed with
    /// another key do not open here), every record of the site — no `since`, no `limit`: a late stage catches up on
    /// every target (``SiteLedger/Limits/maxRecords``).
    public var siteFilter: NostrFilter? {
        guard let publisher, siteKey != nil else { return nil }
        return NostrFilter(authors: [publisher.publicKey.hex], kinds: [SiteRecord.kind], tags: [SiteRecord.Tag.site: [site]])
    }

    /// The relay subscription for the site's lists by the operator keys (no `since`: a replaceable list may
    /// be older than any lookback, and relays keep only the newest per key and site).
    public var filter: NostrFilter {
        NostrFilter(authors: operators.map(\.hex).sorted(), kinds: [FleetList.kind], tags: ["d": [site]])
    }
}
