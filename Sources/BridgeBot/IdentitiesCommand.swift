import BotStorage
import BridgeApp
import BotSupport
import Console
import IdentityCache
import ModerationLog
import Nostr
import Identity
import BridgeCore

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

    static let dataDirOption = OptionSpec.value(
        "--data-dir", "DIR", "Data directory (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge).")
    static let jsonOption = OptionSpec.flag("--json", "Print JSON.")
    static let keyHelp = """
        KEY is mesh:<64 hex> (fingerprint), nostr:<64 hex> (x-only pubkey), an npub1…, or at least 8 hex of a
        key already in the cache, as the tables show it (mesh: or nostr: first when both kinds match; a prefix
        that matches several keys exits 64 listing them). Any relationship (allow, verify, block, petname, note,
        or a trust level left by unverify) protects the identity from eviction.
        """

    /// One annotating subcommand taking KEY (and for note/petname a value), with its own spec.
    private static func keyed(_ verb: String, _ summary: String, value: String? = nil) -> Subcommand {
        Subcommand(verb, CommandSpec(
            path: "identities \(verb)", summary: summary,
            positionals: [PositionalSpec(name: "KEY")] + (value.map { [.text($0)] } ?? []),
            options: [dataDirOption, jsonOption], note: value.map { "(an empty \($0) removes it)" } ?? "", details: keyHelp)
        ) { args throws(CommandExit) in try annotate(verb, args) }
    }

    static let group = CommandGroup(
        name: "identities",
        summary: "List and annotate the identities the bridge has met (mesh fingerprints and Nostr pubkeys).",
        subcommands: [
            Subcommand("list", CommandSpec(
                path: "identities list", summary: "List the identities in the stranger cache, protected ones included.",
                options: [
                    dataDirOption,
                    .flag("--strangers", "Only identities without any relationship."),
                    .flag("--protected", "Only identities with a relationship (protected from eviction)."),
                    .value("--limit", "N", "At most N rows (default \(Limits.defaultListLimit))."),
                    jsonOption,
                ])) { args throws(CommandExit) in
                    try list(args, dataDirectory: Paths.dataDirectory(option: args.value("--data-dir")))
                },
            keyed("allow", "Mark KEY as allowed (a relationship: protected from eviction)."),
            keyed("unallow", "Remove KEY's allow mark."),
            keyed("block", "Block KEY: its messages are hidden (rule blocked); blocking also protects it, so the block survives."),
            keyed("unblock", "Remove KEY's block."),
            keyed("verify", "Mark KEY as verified (trust 'verified'); protects it."),
            keyed("unverify", "Remove KEY's verification; trust 'casual' stays, which still protects."),
            keyed("note", "Set a private note on KEY.", value: "TEXT"),
            keyed("petname", "Set a petname for KEY.", value: "NAME"),
            Subcommand("forget", CommandSpec(
                path: "identities forget", summary: "Remove KEY from the cache with everything on it.",
                positionals: [PositionalSpec(name: "KEY")], options: [dataDirOption], details: keyHelp)) { args throws(CommandExit) in
                    let text = args.positionals[0]
                    let dataDirectory = Paths.dataDirectory(option: args.value("--data-dir"))
                    let (cache, _, database) = try open(dataDirectory)
                    let key = try resolve(text, cache: cache, database: database)
                    do {
                        print(try cache.forget(key) ? "Forgot \(key.qualified)" : "\(key.qualified) was not in the cache")
                    } catch {
                        throw .failure("cannot forget \(key): \(error)")
                    }
                    CLIAudit.record(action: "forget", target: key.qualified, database: database)
                    tellBridge(dataDirectory: dataDirectory)
                },
            Subcommand("stats", CommandSpec(
                path: "identities stats", summary: "Count the identities, strangers and protected ones.",
                options: [dataDirOption, jsonOption])) { args throws(CommandExit) in
                    try stats(json: args.has("--json"), dataDirectory: Paths.dataDirectory(option: args.value("--data-dir")))
                },
        ],
        details: """
            The policy file <data-dir>/policy.json ({"allow": [...], "verify": [...], "block": [...]}) also protects.
            Edits go to the database at once and the running bridge on the data directory applies them at once
            (told on its control socket).
            """)

    /// allow|unallow|block|unblock|verify|unverify KEY, note KEY TEXT, petname KEY NAME.
    private static func annotate(_ verb: String, _ args: ParsedArguments) throws(CommandExit) {
        let dataDirectory = Paths.dataDirectory(option: args.value("--data-dir"))
        let json = args.has("--json")
        switch verb {
        case "note", "petname":
            let values = args.positionals
            let value = values[1].isEmpty ? nil : values[1]
            let limit = verb == "note" ? Annotations.Limits.maxNotesBytes : Annotations.Limits.maxPetnameBytes
            if let value, value.utf8.count > limit {
                throw .usage("\(verb) is \(value.utf8.count) bytes; at most \(limit) UTF-8 bytes")
            }
            try annotate(values[0], action: verb, dataDirectory: dataDirectory, json: json) { annotations in
                if verb == "note" { annotations.notes = value } else { annotations.petname = value }
            }
        default:
            let text = args.positionals[0]
            try annotate(text, action: verb, dataDirectory: dataDirectory, json: json) { annotations in
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
        }
    }

    /// Tells the bridge running on `dataDirectory` that its stores changed; when none answers, warns (issue 35: a block
    /// on a directory where no bridge runs — a mistyped `--data-dir` — said nothing and exited 0): the change is stored
    /// there and takes effect when a bridge starts on it.
    /// `site`: the block or staff mark to make a site record of (issue 35), as the console's buttons do.
    static func tellBridge(dataDirectory: String, site: (SiteTarget, Bool)? = nil) {
        let action = site.map { (target: $0.0, on: $0.1, by: CLIAudit.principal) }
        guard !ControlSocket.notifyStoresChanged(dataDirectory: dataDirectory, site: action) else { return }
        printError("warning: no bridge runs on \(dataDirectory): the change is stored there and takes effect when a bridge "
            + "starts on it, on that stage only (site records are made by a running bridge); if you meant a running bridge, "
            + "check --data-dir (or BRIDGE_DATA_DIR)")
    }

    /// Opens the database and the cache over it, with the policy file (when readable).
    /// One connection to the data directory's database serves the cache, the moderation log's senders (``MetKeys``) and
    /// the audit row (``CLIAudit``).
    private static func open(_ dataDirectory: String) throws(CommandExit) -> (PeerIdentityCache, SQLiteIdentityStore, SQLiteDatabase) {
        try KeysCommand.checkDataDirectory(dataDirectory)
        do {
            try FileIO.makeDirectory(dataDirectory)
        } catch {
            throw .failure("cannot create data directory: \(error)")
        }
        let database: SQLiteDatabase
        let store: SQLiteIdentityStore
        do {
            database = try SQLiteDatabase(path: FileIO.join(dataDirectory, SQLiteIdentityStore.databaseFileName))
            store = try SQLiteIdentityStore(database: database)
        } catch {
            throw .failure("cannot open the identity database: \(error)")
        }
        let cache = PeerIdentityCache(store: store, logger: Logger(label: "identities", level: .warning))
        cache.setOperatorLists(try? OperatorLists.load(path: FileIO.join(dataDirectory, "policy.json")))
        return (cache, store, database)
    }

    /// KEY text → key: an npub; `mesh:`/`nostr:` with all 64 hex (a key not met yet may be annotated too); or a
    /// prefix of at least 8 hex, bare or with its kind, of a key the bridge has met — in the cache or the moderation
    /// log (``MetKeys``, as the console resolves it).
    static func resolve(_ text: String, cache: PeerIdentityCache, database: SQLiteDatabase) throws(CommandExit) -> IdentityKey {
        if text.hasPrefix("npub1") {
            do {
                return try IdentityKey.nostr(pubkey: try Bech32.decodeKey(text, hrp: "npub"))
            } catch {
                throw .usage("'\(text)' is not a valid npub (\(error))")
            }
        }
        do {
            return try MetKeys.resolve(
                text, identities: cache, moderationLog: try? ModerationLog(database: database, config: ModerationLogConfig(), logger: nil))
        } catch {
            throw CommandExit(error)
        }
    }

    private static func annotate(
        _ text: String, action: String, dataDirectory: String, json: Bool, _ change: (inout Annotations) -> Void
    ) throws(CommandExit) {
        let (cache, _, database) = try open(dataDirectory)
        let key = try resolve(text, cache: cache, database: database)
        let record: IdentityRecord?
        do {
            record = try cache.annotate(key, change)
        } catch {
            throw .failure("cannot update \(key): \(error)")
        }
        CLIAudit.record(action: action, target: key.qualified, database: database)
        tellBridge(dataDirectory: dataDirectory, site: SiteTarget.senderAction(action, key: key))
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
        let (cache, store, _) = try open(dataDirectory)
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
        let (cache, store, _) = try open(dataDirectory)
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
        if record.pinRefusals > 0 { text += "  refused impostor announces: \(record.pinRefusals)" }
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
        fields.append(("pin_refusals", .integer(Int64(record.pinRefusals))))
        fields.append(("last_pin_refusal_ms", record.lastPinRefusal.map { .integer($0.millisecondsSince1970) } ?? .null))
        return .object(fields)
    }
}
