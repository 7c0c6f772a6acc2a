import BotSupport

/// The operator's policy file: keys to allow, verify or block, read by the bridge at start and on SIGHUP.
///
/// The cache runs no retention pass until it holds a readable policy (``PeerIdentityCache/setOperatorLists(_:)``
/// with a value), so a policy file that cannot be read never lets protected identities be evicted as strangers.
/// A missing file is an empty policy (a fresh install); an unreadable or malformed one is not.
///
/// Format (`<data-dir>/policy.json`):
/// ```
/// {"allow": ["nostr:<64 hex>", …], "verify": ["mesh:<64 hex>", …], "block": [ … ]}
/// ```
/// Keys that the CLI annotates (`identities block KEY`) live on the identity's row instead; both protect.
public struct OperatorLists: Equatable, Sendable {
    public enum Limits {
        /// A hand-written list; 10,000 keys is far beyond any festival operator's list and bounds the parse.
        public static let maxEntries = 10_000
        /// Each entry is ~70 bytes; 2 MiB bounds the file read.
        public static let maxFileBytes = 2 << 20
    }

    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        case json(String)
        case notAnObject
        case unknownField(String)
        case notAList(String)
        case badKey(field: String, index: Int, reason: IdentityKeyError)
        case tooManyEntries(Int)

        public var description: String {
            switch self {
            case .json(let reason): "not valid JSON: \(reason)"
            case .notAnObject: "the policy must be a JSON object"
            case .unknownField(let name): "unknown field '\(name)' (allowed: allow, verify, block)"
            case .notAList(let name): "'\(name)' must be a list of keys"
            case .badKey(let field, let index, let reason): "\(field)[\(index)]: \(reason)"
            case .tooManyEntries(let count): "\(count) entries, more than \(Limits.maxEntries)"
            }
        }
    }

    public var allowed: Set<IdentityKey> = []
    public var verified: Set<IdentityKey> = []
    public var blocked: Set<IdentityKey> = []

    public init(allowed: Set<IdentityKey> = [], verified: Set<IdentityKey> = [], blocked: Set<IdentityKey> = []) {
        self.allowed = allowed
        self.verified = verified
        self.blocked = blocked
    }

    /// An empty policy: nobody protected by the file (rows may still carry annotations).
    public static let empty = OperatorLists()

    /// True when the file lists `key` in any list: a relationship, so the key is protected.
    public func protects(_ key: IdentityKey) -> Bool {
        allowed.contains(key) || verified.contains(key) || blocked.contains(key)
    }

    public var count: Int { allowed.count + verified.count + blocked.count }

    /// Parses the policy file's bytes; every failure names its reason.
    public init(json bytes: [UInt8]) throws(ParseError) {
        let value: JSONValue
        do {
            value = try JSONParser(limits: .init(maxBytes: Limits.maxFileBytes, maxDepth: 4)).parse(bytes)
        } catch {
            throw .json("\(error)")
        }
        guard let fields = value.objectValue else { throw .notAnObject }
        var total = 0
        for (name, list) in fields {
            guard ["allow", "verify", "block"].contains(name) else { throw .unknownField(name) }
            guard let items = list.arrayValue else { throw .notAList(name) }
            total += items.count
            guard total <= Limits.maxEntries else { throw .tooManyEntries(total) }
            var keys = Set<IdentityKey>()
            for (index, item) in items.enumerated() {
                guard let text = item.stringValue else { throw .badKey(field: name, index: index, reason: .unknownPrefix("")) }
                do {
                    keys.insert(try IdentityKey(qualified: text))
                } catch {
                    throw .badKey(field: name, index: index, reason: error)
                }
            }
            switch name {
            case "allow": allowed.formUnion(keys)
            case "verify": verified.formUnion(keys)
            default: blocked.formUnion(keys)
            }
        }
    }

    public enum LoadError: Error, Equatable, Sendable, CustomStringConvertible {
        case unreadable(String)
        case malformed(ParseError)

        public var description: String {
            switch self {
            case .unreadable(let reason): "policy file unreadable: \(reason)"
            case .malformed(let reason): "policy file malformed: \(reason)"
            }
        }
    }
}
