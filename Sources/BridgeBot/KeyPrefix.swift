import BridgeApp
import Identity

/// A key as an operator types it (issue 23 finding 5): the tables show the first 16 hex of a key, so every command
/// that takes a key takes a unique prefix of at least ``minimumHex`` hex characters, bare or with its kind
/// (`mesh:` / `nostr:`), as well as the whole key. A prefix must match exactly one key the bridge has met; more
/// exit 64 listing the candidates (at most ``maxCandidates``), so the operator types more of it.
struct KeyPrefix {
    /// 8 hex = 32 bits: two keys of a festival's few thousand share one with a chance of about 1 in 1,000.
    static let minimumHex = 8
    /// The candidates an ambiguous prefix lists (the lookup asks for one more, to say "more than").
    static let maxCandidates = 10

    let text: String
    let kind: IdentityKind?
    /// Lowercase hex, ``minimumHex``…64 characters.
    let hex: String

    var isWholeKey: Bool { hex.count == IdentityKey.Limits.keyBytes * 2 }

    init(_ text: String) throws(CommandExit) {
        self.text = text
        var rest = Substring(text)
        var kind: IdentityKind?
        for candidate in IdentityKind.allCases where rest.hasPrefix(candidate.name + ":") {
            kind = candidate
            rest = rest.dropFirst(candidate.name.count + 1)
        }
        let hex = rest.lowercased()
        guard (Self.minimumHex...IdentityKey.Limits.keyBytes * 2).contains(hex.count), hex.allSatisfy(\.isHexDigit) else {
            throw .usage(
                "'\(text)' is not a key: give at least \(Self.minimumHex) hex characters of it (as the tables show), "
                    + "with mesh: or nostr: when both kinds could match, all 64, or an npub1…")
        }
        self.kind = kind
        self.hex = hex
    }

    /// The one match among `candidates` (as the lookup found them, up to ``maxCandidates`` + 1), or exit 64: none
    /// (`absent` says what to do) or several (listed).
    func unique<T>(_ candidates: [T], describe: (T) -> String, absent: String) throws(CommandExit) -> T {
        guard candidates.count != 1 else { return candidates[0] }
        guard !candidates.isEmpty else { throw .usage(absent) }
        let count = candidates.count > Self.maxCandidates ? "more than \(Self.maxCandidates)" : "\(candidates.count)"
        let listed = candidates.prefix(Self.maxCandidates).map { "  " + describe($0) }.joined(separator: "\n")
        throw .usage("'\(text)' matches \(count) keys; give more of it:\n\(listed)")
    }
}
