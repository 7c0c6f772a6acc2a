public import BotSupport

/// Why a denylist was refused; `field` names the entry so the console can say which.
public enum DenylistError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooMany(limit: Int)
    case empty(index: Int)
    case tooLong(index: Int, limit: Int)
    case badRegex(index: Int, pattern: String, reason: String)
    case notAList(field: String)

    public var description: String {
        switch self {
        case .tooMany(let limit): "a denylist holds at most \(limit) entries"
        case .empty(let index): "denylist entry \(index) is empty"
        case .tooLong(let index, let limit): "denylist entry \(index) is longer than \(limit) bytes"
        case .badRegex(let index, let pattern, let reason): "denylist entry \(index): '\(pattern)' is not a regular expression (\(reason))"
        case .notAList(let field): "\(field) must be a list of {\"keyword\": …} or {\"regex\": …} objects"
        }
    }
}

/// The operator's keyword and regular-expression denylist (issue 18, settings): a message whose text contains a
/// keyword (case-insensitive) or matches a pattern is hidden, rule `denylist`. Part of ``BridgeJudge``: the
/// console's preview asks ``match(_:)`` — the same code that hides — over recent texts.
public struct Denylist: Sendable, Equatable {
    public enum Entry: Sendable, Equatable, Hashable {
        case keyword(String)
        case regex(String)

        public var pattern: String {
            switch self {
            case .keyword(let k): k
            case .regex(let r): r
            }
        }

        public var kind: String {
            switch self {
            case .keyword: "keyword"
            case .regex: "regex"
            }
        }

        public var jsonValue: JSONValue { .object([(kind, .string(pattern))]) }
    }

    public enum Limits {
        /// Entries at once: each is tried on every message, so the list stays short.
        public static let maxEntries = 200
        /// Longest keyword or pattern, bytes.
        public static let maxPatternBytes = 256
    }

    /// A compiled pattern (Swift's `Regex`, checked once when the list is set).
    private struct Compiled: @unchecked Sendable {
        // Regex values are immutable once built; matching from several threads reads only.
        let regex: Regex<AnyRegexOutput>
    }

    public let entries: [Entry]
    private let lowered: [String?]
    private let compiled: [Compiled?]

    public static let empty = try! Denylist([])

    public init(_ entries: [Entry]) throws(DenylistError) {
        guard entries.count <= Limits.maxEntries else { throw .tooMany(limit: Limits.maxEntries) }
        var lowered: [String?] = []
        var compiled: [Compiled?] = []
        for (index, entry) in entries.enumerated() {
            guard !entry.pattern.isEmpty else { throw .empty(index: index) }
            guard entry.pattern.utf8.count <= Limits.maxPatternBytes else { throw .tooLong(index: index, limit: Limits.maxPatternBytes) }
            switch entry {
            case .keyword(let k):
                lowered.append(k.lowercased())
                compiled.append(nil)
            case .regex(let pattern):
                do {
                    compiled.append(Compiled(regex: try Regex(pattern).ignoresCase()))
                } catch {
                    throw .badRegex(index: index, pattern: pattern, reason: "\(error)")
                }
                lowered.append(nil)
            }
        }
        self.entries = entries
        self.lowered = lowered
        self.compiled = compiled
    }

    /// The first entry `text` trips, or nil.
    public func match(_ text: String) -> Entry? {
        guard !entries.isEmpty else { return nil }
        let lowerText = text.lowercased()
        for (index, entry) in entries.enumerated() {
            if let keyword = lowered[index], lowerText.contains(keyword) { return entry }
            if let regex = compiled[index]?.regex, (try? regex.firstMatch(in: text)) != nil { return entry }
        }
        return nil
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// The keywords, lowercased (what the site's word records name).
    public var keywords: [String] { lowered.compactMap { $0 } }

    /// This list with the site's word records laid over (issue 35): keywords a record removed are left out, those a
    /// record set are added after the rest; words beyond ``Limits/maxEntries`` are left out and counted (`dropped`).
    public func overlaying(_ words: SiteLedger.Overlay<String>) -> (denylist: Denylist, dropped: Int) {
        guard !words.set.isEmpty || !words.cleared.isEmpty else { return (self, 0) }
        var kept = entries.filter { entry in
            if case .keyword(let k) = entry { return !words.cleared.contains(k.lowercased()) }
            return true
        }
        let present = Set(kept.compactMap { entry -> String? in
            if case .keyword(let k) = entry { return k.lowercased() }
            return nil
        })
        let added = words.set.subtracting(present).sorted()
        let room = max(0, Limits.maxEntries - kept.count)
        kept += added.prefix(room).map { .keyword($0) }
        // Every entry was checked already (this list's by its maker, the words by the record parser).
        return ((try? Denylist(kept)) ?? self, max(0, added.count - room))
    }

    public static func == (a: Denylist, b: Denylist) -> Bool { a.entries == b.entries }

    // MARK: JSON (`<data-dir>/denylist.json`, the console's settings)

    public var jsonValue: JSONValue { .array(entries.map(\.jsonValue)) }

    public init(json: JSONValue, field: String = "denylist") throws(DenylistError) {
        guard let items = json.arrayValue else { throw .notAList(field: field) }
        var entries: [Entry] = []
        for item in items {
            guard let members = item.objectValue, members.count == 1, let value = members[0].1.stringValue else {
                throw .notAList(field: field)
            }
            switch members[0].0 {
            case "keyword": entries.append(.keyword(value))
            case "regex": entries.append(.regex(value))
            default: throw .notAList(field: field)
            }
        }
        try self.init(entries)
    }
}
