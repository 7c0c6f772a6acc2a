/// A key as an operator types it (issue 23 finding 5; issue 35: the console too): the tables show the first 16 hex of a
/// key, so everything that takes a key takes a unique prefix of at least ``minimumHex`` hex characters, bare or with its
/// kind (`mesh:` / `nostr:`), as well as the whole key. A prefix must match exactly one key the bridge has met; more
/// are refused listing the candidates (at most ``maxCandidates``), so the operator types more of it.
public struct KeyPrefix: Sendable {
    /// 8 hex = 32 bits: two keys of a festival's few thousand share one with a chance of about 1 in 1,000.
    public static let minimumHex = 8
    /// The candidates an ambiguous prefix lists (the lookup asks for one more, to say "more than").
    public static let maxCandidates = 10

    public let text: String
    public let kind: IdentityKind?
    /// Lowercase hex, ``minimumHex``…64 characters.
    public let hex: String

    public var isWholeKey: Bool { hex.count == IdentityKey.Limits.keyBytes * 2 }

    public init(_ text: String) throws(KeyPrefixError) {
        self.text = text
        var rest = Substring(text)
        var kind: IdentityKind?
        for candidate in IdentityKind.allCases where rest.hasPrefix(candidate.name + ":") {
            kind = candidate
            rest = rest.dropFirst(candidate.name.count + 1)
        }
        let hex = rest.lowercased()
        guard (Self.minimumHex...IdentityKey.Limits.keyBytes * 2).contains(hex.count), hex.allSatisfy(\.isHexDigit) else {
            throw .notAKey(text)
        }
        self.kind = kind
        self.hex = hex
    }

    /// The one match among `candidates` (as the lookup found them, up to ``maxCandidates`` + 1), or none (`absent`
    /// says what to do) or several (listed).
    public func unique<T>(_ candidates: [T], describe: (T) -> String, absent: String) throws(KeyPrefixError) -> T {
        try Self.unique(candidates, text: text, describe: describe, absent: absent)
    }

    /// The same for anything an operator names by the prefix a table shows (`noun`: what the candidates are, e.g. the
    /// moderation log's message ids).
    public static func unique<T>(
        _ candidates: [T], text: String, noun: String = "keys", describe: (T) -> String, absent: String
    ) throws(KeyPrefixError) -> T {
        guard candidates.count != 1 else { return candidates[0] }
        guard !candidates.isEmpty else { throw .absent(absent) }
        let count = candidates.count > maxCandidates ? "more than \(maxCandidates)" : "\(candidates.count)"
        throw .ambiguous(text: text, count: count, noun: noun, candidates: candidates.prefix(maxCandidates).map(describe))
    }

    /// The key `text` names, the whole key as typed (`mesh:`/`nostr:` and 64 hex: a key not met yet may be marked too),
    /// or the one key the lookup finds for the prefix: `lookup(hexPrefix, kind, limit)` gives the keys the bridge has met
    /// of that kind that start with it.
    public static func resolve(
        _ text: String, lookup: (_ hexPrefix: String, _ kind: IdentityKind, _ limit: Int) throws -> [IdentityKey]
    ) throws(KeyPrefixError) -> IdentityKey {
        let typed = try KeyPrefix(text)
        if typed.isWholeKey, let kind = typed.kind {
            do {
                return try IdentityKey(qualified: "\(kind.name):\(typed.hex)")
            } catch {
                throw .invalid(text: text, reason: "\(error)")
            }
        }
        var found: Set<IdentityKey> = []
        do {
            for kind in typed.kind.map({ [$0] }) ?? IdentityKind.allCases {
                found.formUnion(try lookup(typed.hex, kind, maxCandidates + 1))
            }
        } catch {
            throw .lookupFailed("\(error)")
        }
        let absent = typed.isWholeKey
            ? "'\(text)' is not a key the bridge has met; write mesh:\(text) or nostr:\(text) to mark a key not seen yet"
            : "no key the bridge has met starts with '\(text)'"
        return try typed.unique(found.sorted(), describe: { $0.qualified }, absent: absent)
    }
}

/// Why a typed key names no single key.
public enum KeyPrefixError: Error, Equatable, Sendable, CustomStringConvertible {
    case notAKey(String)
    case invalid(text: String, reason: String)
    /// No key matches (what to do).
    case absent(String)
    case ambiguous(text: String, count: String, noun: String, candidates: [String])
    /// The stores could not be read.
    case lookupFailed(String)

    public var description: String {
        switch self {
        case .notAKey(let text):
            "'\(text)' is not a key: give at least \(KeyPrefix.minimumHex) hex characters of it (as the tables show), "
                + "with mesh: or nostr: when both kinds could match, all 64, or an npub1…"
        case .invalid(let text, let reason): "'\(text)': \(reason)"
        case .absent(let what): what
        case .ambiguous(let text, let count, let noun, let candidates):
            "'\(text)' matches \(count) \(noun); give more of it:\n" + candidates.map { "  " + $0 }.joined(separator: "\n")
        case .lookupFailed(let reason): "cannot read the identities: \(reason)"
        }
    }
}
