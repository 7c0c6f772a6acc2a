import BotSupport
import IdentityCache
import Nostr

/// `bitchat-bridge identities …`: the operator's view of the stranger cache, and the relationships that protect
/// identities from eviction. Edits go to the data directory's database in one transaction each; a running
/// bridge reads rows on every lookup, so blocks take effect at once (the policy file needs SIGHUP).
enum IdentitiesCommand {
    enum Limits {
        /// Default page of `list`; the cache holds at most ~2,000 strangers plus the protected set.
        static let defaultListLimit = 200
        /// Upper bound of `--limit`, so a listing never loads an unbounded table into memory at once.
        static let maxListLimit = 100_000
    }

    static let spec = CommandSpec(
        path: "identities",
        summary: "List and annotate the identities the bridge has met (mesh fingerprints and Nostr pubkeys).",
        usage: [
            "list [--strangers|--protected] [--limit N] [--json]",
            "allow|unallow|block|unblock|verify|unverify KEY",
            "note KEY TEXT          (empty TEXT removes the note)",
            "petname KEY NAME       (empty NAME removes the petname)",
            "forget KEY",
            "stats [--json]",
        ],
        options: [
            .value("--data-dir", "DIR", "Data directory (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge)."),
            .flag("--strangers", "list: only identities without any relationship."),
            .flag("--protected", "list: only identities with a relationship (protected from eviction)."),
            .value("--limit", "N", "list: at most N rows (default \(Limits.defaultListLimit))."),
            .flag("--json", "Print JSON."),
        ],
        details: """
            KEY is mesh:<64 hex> (fingerprint), nostr:<64 hex> (x-only pubkey), an npub1…, or bare hex of a key
            already in the cache. Any relationship (allow, verify, block, petname, note, or a trust level left
            by unverify) protects the identity from eviction; blocking is how a block survives. unverify leaves
            trust 'casual', which still protects. forget removes the identity and everything on it.
            The policy file <data-dir>/policy.json ({"allow": [...], "verify": [...], "block": [...]}) also protects.
            """
    )

    static func run(_ arguments: [String]) throws(CommandExit) {
        let args = try ParsedArguments.parse(arguments, spec: spec)
        guard let verb = args.positionals.first else { throw .usage("missing subcommand (list, allow, block, …, stats)") }
        var rest = args
        rest.positionals.removeFirst()
        let dataDirectory = Paths.dataDirectory(option: args.value("--data-dir"))
        switch verb {
        case "list":
            _ = try rest.requirePositionals([])
            try list(rest, dataDirectory: dataDirectory)
        case "stats":
            _ = try rest.requirePositionals([])
            try stats(json: rest.has("--json"), dataDirectory: dataDirectory)
        case "allow", "unallow", "block", "unblock", "verify", "unverify":
            let text = try rest.requirePositionals(["key"])[0]
            try annotate(text, dataDirectory: dataDirectory, json: rest.has("--json")) { annotations in
                switch verb {
                case "allow":
                    annotations.allowed = true
                    annotations.blocked = false
                case "unallow": annotations.allowed = false
                case "block":
                    annotations.blocked = true
                    annotations.allowed = false
                case "unblock": annotations.blocked = false
                case "verify":
                    annotations.verified = true
                    annotations.trust = .verified
                default:
                    // Removing a verification leaves casual trust, which still protects (STRANGER-CACHE §2).
                    annotations.verified = false
                    if annotations.trust == .verified { annotations.trust = .casual }
                }
            }
        case "note", "petname":
            let values = try rest.requirePositionals(["key", verb == "note" ? "text" : "name"])
            let value = values[1].isEmpty ? nil : values[1]
            let limit = verb == "note" ? Annotations.Limits.maxNotesBytes : Annotations.Limits.maxPetnameBytes
            if let value, value.utf8.count > limit {
                throw .usage("\(verb) is \(value.utf8.count) bytes; at most \(limit) UTF-8 bytes")
            }
            try annotate(values[0], dataDirectory: dataDirectory, json: rest.has("--json")) { annotations in
                if verb == "note" { annotations.notes = value } else { annotations.petname = value }
            }
        case "forget":
            let text = try rest.requirePositionals(["key"])[0]
            let (cache, store) = try open(dataDirectory)
            let key = try resolve(text, store: store)
            do {
                print(try cache.forget(key) ? "Forgot \(key.qualified)" : "\(key.qualified) was not in the cache")
            } catch {
                throw .failure("cannot forget \(key): \(error)")
            }
        default:
            throw .usage("unknown subcommand '\(verb)' (see bitchat-bridge identities --help)")
        }
    }

    /// Opens the database and the cache over it, with the policy file (when readable).
    private static func open(_ dataDirectory: String) throws(CommandExit) -> (PeerIdentityCache, SQLiteIdentityStore) {
        do {
            try FileIO.makeDirectory(dataDirectory)
        } catch {
            throw .failure("cannot create data directory: \(error)")
        }
        let store: SQLiteIdentityStore
        do {
            store = try SQLiteIdentityStore(path: FileIO.join(dataDirectory, SQLiteIdentityStore.databaseFileName))
        } catch {
            throw .failure("cannot open the identity database: \(error)")
        }
        let cache = PeerIdentityCache(store: store, logger: Logger(label: "identities", level: .warning))
        cache.setOperatorLists(try? OperatorLists.load(path: FileIO.join(dataDirectory, "policy.json")))
        return (cache, store)
    }

    /// KEY text → key: qualified, npub, or bare hex of a key already in the cache (unambiguous).
    static func resolve(_ text: String, store: any IdentityStore) throws(CommandExit) -> IdentityKey {
        if text.hasPrefix("npub1") {
            do {
                return try IdentityKey.nostr(pubkey: try Bech32.decodeKey(text, hrp: "npub"))
            } catch {
                throw .usage("'\(text)' is not a valid npub (\(error))")
            }
        }
        if text.contains(":") {
            do {
                return try IdentityKey(qualified: text)
            } catch {
                throw .usage("'\(text)': \(error)")
            }
        }
        var found: [IdentityKey] = []
        for kind in IdentityKind.allCases {
            guard let key = try? IdentityKey(qualified: "\(kind.name):\(text)") else {
                throw .usage("'\(text)' is not a key: use mesh:<64 hex>, nostr:<64 hex> or npub1…")
            }
            do {
                if try store.record(key) != nil { found.append(key) }
            } catch {
                throw .failure("cannot read the identity database: \(error)")
            }
        }
        guard found.count == 1 else {
            throw .usage(found.isEmpty
                ? "'\(text)' is not in the cache; write mesh:\(text) or nostr:\(text) to annotate a key not seen yet"
                : "'\(text)' is both a mesh and a Nostr key; write mesh:\(text) or nostr:\(text)")
        }
        return found[0]
    }

    private static func annotate(
        _ text: String, dataDirectory: String, json: Bool, _ change: (inout Annotations) -> Void
    ) throws(CommandExit) {
        let (cache, store) = try open(dataDirectory)
        let key = try resolve(text, store: store)
        let record: IdentityRecord?
        do {
            record = try cache.annotate(key, change)
        } catch {
            throw .failure("cannot update \(key): \(error)")
        }
        if json {
            printJSON(record.map { recordJSON($0, lists: cache.operatorLists) } ?? .object([("key", .string(key.qualified)), ("removed", .bool(true))]))
            return
        }
        guard let record else {
            print("\(key.qualified): no relationship left and never seen, removed")
            return
        }
        print(line(record, lists: cache.operatorLists))
    }

    private static func list(_ args: ParsedArguments, dataDirectory: String) throws(CommandExit) {
        guard !(args.has("--strangers") && args.has("--protected")) else {
            throw .usage("--strangers and --protected exclude each other")
        }
        var limit = Limits.defaultListLimit
        if let text = args.value("--limit") {
            guard let n = Int(text), n >= 1, n <= Limits.maxListLimit else {
                throw .usage("--limit '\(text)' must be 1–\(Limits.maxListLimit)")
            }
            limit = n
        }
        let (cache, store) = try open(dataDirectory)
        var selected: [IdentityRecord] = []
        var after: IdentityKey?
        do {
            while selected.count < limit {
                let page = try store.records(.all, limit: 500, after: after)
                guard let last = page.last else { break }
                after = last.key
                for record in page {
                    let protected = cache.isProtected(record)
                    if args.has("--strangers") && protected || args.has("--protected") && !protected { continue }
                    selected.append(record)
                    if selected.count == limit { break }
                }
            }
        } catch {
            throw .failure("cannot read the identity database: \(error)")
        }
        if args.has("--json") {
            printJSON(.array(selected.map { recordJSON($0, lists: cache.operatorLists) }))
            return
        }
        if selected.isEmpty { print("No identities.") }
        for record in selected { print(line(record, lists: cache.operatorLists)) }
    }

    private static func stats(json: Bool, dataDirectory: String) throws(CommandExit) {
        let (cache, store) = try open(dataDirectory)
        let total: Int
        var strangers: Int
        do {
            total = try store.count()
            strangers = try store.strangerCount()
            if let lists = cache.operatorLists {
                for key in lists.allowed.union(lists.verified).union(lists.blocked) {
                    if let record = try store.record(key), record.isStranger { strangers -= 1 }
                }
            }
        } catch {
            throw .failure("cannot read the identity database: \(error)")
        }
        let policy = cache.operatorLists == nil ? "unreadable (no retention pass would run)" : "ok"
        let value: JSONValue = .object([
            ("database", .string(FileIO.join(dataDirectory, SQLiteIdentityStore.databaseFileName))),
            ("identities", .integer(Int64(total))),
            ("strangers", .integer(Int64(strangers))),
            ("protected", .integer(Int64(total - strangers))),
            ("stranger_cap", .integer(Int64(RetentionRules.Limits.strangerCap))),
            ("trim_target", .integer(Int64(RetentionRules.Limits.strangerTrimTarget))),
            ("retention_days", .integer(Int64(RetentionRules.Limits.maxStampAgeDays))),
            ("policy_file", .string(policy)),
        ])
        if json {
            printJSON(value)
            return
        }
        print("Identities in \(FileIO.join(dataDirectory, SQLiteIdentityStore.databaseFileName)):")
        print("  total:      \(total)")
        print("  strangers:  \(strangers) (cap \(RetentionRules.Limits.strangerCap), trimmed to \(RetentionRules.Limits.strangerTrimTarget))")
        print("  protected:  \(total - strangers)")
        print("  policy file: \(policy)")
    }

    private static func relationships(_ record: IdentityRecord, lists: OperatorLists?) -> [String] {
        let a = record.annotations
        var out: [String] = []
        if a.allowed || lists?.allowed.contains(record.key) == true { out.append("allowed") }
        if a.verified || lists?.verified.contains(record.key) == true { out.append("verified") }
        if a.blocked || lists?.blocked.contains(record.key) == true { out.append("blocked") }
        if a.trust != .unknown { out.append("trust=\(a.trust.name)") }
        if a.petname != nil { out.append("petname") }
        if a.notes != nil { out.append("notes") }
        return out
    }

    private static func line(_ record: IdentityRecord, lists: OperatorLists?) -> String {
        let tags = relationships(record, lists: lists)
        var text = record.key.qualified
        text += "  " + (record.nickname.map { "\"\($0)\"" } ?? "-")
        if let petname = record.annotations.petname { text += " (\(petname))" }
        text += "  last seen " + (record.lastSeen.map { "day \($0.number)" } ?? "-")
        text += "  " + (tags.isEmpty ? "stranger" : tags.joined(separator: ","))
        if let notes = record.annotations.notes { text += "  notes: \(notes)" }
        return text
    }

    static func recordJSON(_ record: IdentityRecord, lists: OperatorLists?) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("key", .string(record.key.qualified)),
            ("kind", .string(record.key.kind.name)),
        ]
        if record.key.kind == .nostr { fields.append(("npub", .string(Bech32.encode(hrp: "npub", data: record.key.bytes)))) }
        if let pins = record.pins {
            fields.append(("noise_public_key", .string(Hex.encode(pins.noiseKey))))
            fields.append(("signing_public_key", .string(Hex.encode(pins.signingKey))))
        }
        if let peerID = record.peerID { fields.append(("peer_id", .string(Hex.encode(MeshPins.peerIDBytes(peerID))))) }
        fields.append(("nickname", record.nickname.map { .string($0) } ?? .null))
        fields.append(("first_seen_ms", record.firstSeen.map { .integer($0.millisecondsSince1970) } ?? .null))
        fields.append(("last_seen_day", record.lastSeen.map { .integer(Int64($0.number)) } ?? .null))
        let tags = relationships(record, lists: lists)
        fields.append(("stranger", .bool(tags.isEmpty)))
        fields.append(("relationships", .array(tags.map { .string($0) })))
        fields.append(("trust", .string(record.annotations.trust.name)))
        fields.append(("petname", record.annotations.petname.map { .string($0) } ?? .null))
        fields.append(("notes", record.annotations.notes.map { .string($0) } ?? .null))
        return .object(fields)
    }
}
