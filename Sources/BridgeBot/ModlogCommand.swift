import BridgeApp
import BotStorage
import BotSupport
import Console
import Identity
import ModerationLog
import SpamFilter

#if canImport(Glibc)
import Glibc
import Moderation
#endif

/// `bitchat-bridge modlog`: reads the moderation log (hidden and, in shadow mode, would-be-hidden messages).
enum ModlogCommand {
    static let spec = CommandSpec(
        path: "modlog",
        summary: "Show the moderation log: messages the spam filter hid, with rule and figures.",
        options: [
            .value("--since", "DURATION", "Only records from the last DURATION (90s, 10m, 1h, 2d; a bare number is seconds)."),
            .value("--rule", "RULE", "Only this rule: " + HideRule.allCases.map(\.label).joined(separator: ", ") + "."),
            .value("--direction", "DIR", "nostr-to-mesh or mesh-to-nostr."),
            .value("--sender", "KEY", "Only this sender: its key, or at least 8 hex of it as the table shows (mesh:/nostr: to say which side)."),
            .value("--limit", "N", "At most N records, newest first (default 50)."),
            .flag("--json", "One JSON object per record, one per line."),
            .value("--data-dir", "DIR", "Data directory (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge)."),
        ]
    )

    /// Seconds in a duration like `90s`, `10m`, `1h`, `2d` or `3600`.
    static func parseDuration(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
        var number = Substring(text)
        var factor = 1.0
        if let last = text.last, let unit = units[last] {
            number = text.dropLast()
            factor = unit
        }
        guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
        return value * factor
    }

    static let exportSpec = CommandSpec(
        path: "modlog export",
        summary: "Export the moderation log for an incident report: hidden messages and the site's actions in a time range, oldest first.",
        options: [
            .required("--since", "TIME", "Start of the range, inclusive."),
            .value("--until", "TIME", "End of the range, exclusive (default: now)."),
            .value("--format", "FORMAT", "jsonl (one JSON object a line, default) or csv (RFC 4180, with a header)."),
            .flag("--redact-text", "Leave the message text out (its SHA-256 stays, so copies still match)."),
            .flag("--no-actions", "Hidden messages only: leave the site's actions out (another stage's rows for a site's report)."),
            .value("--output", "FILE", "Write to FILE (created mode 0600) instead of standard output."),
            .value("--data-dir", "DIR", "Data directory (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge)."),
        ],
        details: """
            TIME is 2026-12-01 (midnight UTC), 2026-12-01T10:00:00Z (or with ±HH:MM; no zone means UTC), @UNIX-SECONDS,
            now, or a duration ago (90s, 10m, 1h, 2d, 1w). A bad time or an empty range exits 64 naming the option.
            CSV cells of free text that a spreadsheet would run as a formula (=, +, -, @ first) get a leading '.
            Every row names its bridge (the nickname of the stage that hid the message or made the action). Among the
            hidden messages (record "hidden"), in time order, go the site's moderation actions (record "action": block,
            allow, denylist, release, settings, … with who acted): this bridge's own, from the console and the CLI, and,
            with site records on, every other stage's of the site.
            """)

    static let releaseSpec = CommandSpec(
        path: "modlog release",
        summary: "Release a hidden message through the running bridge, either way: onto the mesh, or onto Nostr.",
        positionals: [PositionalSpec(name: "ID")],
        options: [.value("--data-dir", "DIR", "Data directory of the running bridge (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge).")],
        details: """
            ID is the message id the moderation log shows (a Nostr event id, or a mesh message's id): the table's id column
            (its first 16 hex; any unique prefix of at least 8 hex) or the whole id. The message takes
            the normal path with the judge alone skipped (a mesh-only phone's deposit as its own event, a mesh line as
            the bridge's mirror line); its log rows are marked released (by cli, and when). Exit 1 when no bridge runs
            on the data directory or it cannot release the message (not held: the bridge keeps the last 1,000 hides of
            24 hours; a mesh line needs the uplink mirror on).
            """)

    static let group = CommandGroup(
        name: "modlog",
        summary: "Show, export or release from the moderation log: messages the spam filter hid, with rule and figures.",
        subcommands: [Subcommand("export", exportSpec, run: export), Subcommand("release", releaseSpec, run: release)],
        fallback: Subcommand("show", spec, run: show))

    static func release(_ args: ParsedArguments) throws(CommandExit) {
        let dataDirectory = Paths.dataDirectory(option: args.value("--data-dir"))
        let id = try messageID(args.positionals[0], dataDirectory: dataDirectory)
        _ = try ControlSocket.call(.object([("op", .string("modlog.release")), ("id", .string(id)), ("by", .string(CLIAudit.principal))]), args)
        CLIAudit.record(action: "release", target: id, dataDirectory: dataDirectory)
        print("released \(id): it takes the normal path (loop rules, budgets); its moderation-log rows are marked")
    }

    /// The message id `text` names: a prefix of at least 8 hex as the table shows it (issue 35: release wanted all 64,
    /// which the table never showed) resolved through the moderation log to the one id it starts with; anything else,
    /// or no log to look in, as typed (the bridge says whether it holds it). A prefix matching none or several exits 64.
    static func messageID(_ text: String, dataDirectory: String) throws(CommandExit) -> String {
        let hex = text.lowercased()
        let path = FileIO.join(dataDirectory, "bridge.sqlite3")
        guard hex.count >= KeyPrefix.minimumHex, hex.allSatisfy(\.isHexDigit), FileIO.exists(path) else { return text }
        let ids: [String]
        do {
            try KeysCommand.checkDataDirectory(dataDirectory)
            ids = try ModerationLog(path: path, config: ModerationLogConfig(), logger: nil)
                .messageIDs(hexPrefix: hex, limit: KeyPrefix.maxCandidates + 1)
        } catch let exit as CommandExit {
            throw exit
        } catch {
            throw .failure("\(error)")
        }
        if ids.contains(hex) { return hex }
        do {
            return try KeyPrefix.unique(
                ids, text: text, noun: "messages", describe: { $0 },
                absent: "no message in the moderation log (\(path)) starts with '\(text)': give the id as `bitchat-bridge modlog` shows it")
        } catch {
            throw CommandExit(error)
        }
    }

    static func export(_ args: ParsedArguments) throws(CommandExit) {
        guard let since = args.value("--since") else { throw .usage("--since is required (a TIME; see modlog export --help)") }
        let range: ModerationExportRange
        do {
            range = try ModerationExportRange(since: since, until: args.value("--until"), now: wallClockNow())
        } catch {
            throw .usage(error.description)
        }
        let formatText = args.value("--format") ?? "jsonl"
        guard let format = ModerationExportFormat(rawValue: formatText) else {
            throw .usage("--format '\(formatText)' must be jsonl or csv")
        }
        let redact = args.has("--redact-text")
        let dataDirectory = Paths.dataDirectory(option: args.value("--data-dir"))
        try KeysCommand.checkDataDirectory(dataDirectory)
        let path = FileIO.join(dataDirectory, "bridge.sqlite3")
        guard FileIO.exists(path) else { throw .failure("no moderation log yet (\(path) does not exist)") }
        var output = ExportOutput()
        if let file = args.value("--output") {
            let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw .failure("--output '\(file)': \(String(cString: strerror(errno)))") }
            output.fd = fd
        }
        defer { output.close() }
        let separator = format == .csv ? "\r\n" : "\n"
        if format == .csv { try output.write(ModerationExport.csvHeader + separator) }
        var writeError: CommandExit?
        func write(_ line: String) {
            guard writeError == nil else { return }
            do throws(CommandExit) { try output.write(line + separator) } catch { writeError = error }
        }
        let count: Int
        var actions: ArraySlice<ModerationExportAction> = []
        var actionCount = 0
        do {
            let database = try SQLiteDatabase(path: path)
            let bridge = try ExportedBridgeName.load(from: database) ?? ""
            // The site's actions (this stage's and, as rows of its audit, every other stage's) in time order among the
            // hidden messages: one report (issue 35).
            if !args.has("--no-actions") {
                actions = try ConsoleAudit(database: database).entries(since: range.since, until: range.until)
                    .compactMap { $0.exportAction(bridge: bridge) }[...]
            }
            actionCount = actions.count
            func writeActions(before time: Double) {
                while let next = actions.first, next.at < time {
                    write(format == .csv ? ModerationExport.csvRow(next) : ModerationExport.jsonLine(next))
                    actions.removeFirst()
                }
            }
            let log = try ModerationLog(database: database, config: ModerationLogConfig(), logger: nil)
            count = try log.forEachRecord(since: range.since, until: range.until) { record in
                writeActions(before: record.judgedAt)
                write(format == .csv
                    ? ModerationExport.csvRow(record, redactText: redact, bridge: bridge)
                    : ModerationExport.jsonLine(record, redactText: redact, bridge: bridge))
            }
            writeActions(before: .infinity)
        } catch {
            throw .failure("\(error)")
        }
        if let writeError { throw writeError }
        printError(
            "modlog export: \(count) hidden record\(count == 1 ? "" : "s") and \(actionCount) action\(actionCount == 1 ? "" : "s") "
                + "from \(ModerationExport.utcTimestamp(range.since)) until \(ModerationExport.utcTimestamp(range.until))"
                + "\(redact ? ", text redacted" : "")")
    }

    /// Standard output or a file, written in full (a short write is retried, an error named).
    struct ExportOutput {
        var fd: Int32 = 1

        func write(_ text: String) throws(CommandExit) {
            let bytes = Array(text.utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw .failure("modlog export: write failed: \(String(cString: strerror(errno)))")
                }
                offset += n
            }
        }

        func close() {
            if fd != 1 { _ = Glibc.close(fd) }
        }
    }

    static func show(_ args: ParsedArguments) throws(CommandExit) {
        var query = ModerationQuery(limit: 50)
        if let since = args.value("--since") {
            guard let seconds = parseDuration(since) else { throw .usage("--since '\(since)' is not a duration like 90s, 10m, 1h, 2d") }
            query.since = wallClockNow() - seconds
        }
        if let rule = args.value("--rule") {
            guard let parsed = HideRule(label: rule) else {
                throw .usage("--rule '\(rule)' is not one of " + HideRule.allCases.map(\.label).joined(separator: ", "))
            }
            query.rule = parsed
        }
        if let direction = args.value("--direction") {
            guard let parsed = SpamDirection(text: direction) else {
                throw .usage("--direction '\(direction)' must be nostr-to-mesh or mesh-to-nostr")
            }
            query.direction = parsed
        }
        if let limit = args.value("--limit") {
            guard let n = Int(limit), n >= 1, n <= ModerationLog.Limits.maxQueryLimit else {
                throw .usage("--limit '\(limit)' must be between 1 and \(ModerationLog.Limits.maxQueryLimit)")
            }
            query.limit = n
        }
        let dataDirectory = Paths.dataDirectory(option: args.value("--data-dir"))
        try KeysCommand.checkDataDirectory(dataDirectory)
        let path = FileIO.join(dataDirectory, "bridge.sqlite3")
        guard FileIO.exists(path) else {
            if !args.has("--json") { print("No moderation log yet (\(path) does not exist).") }
            return
        }
        let records: [ModerationRecord]
        do {
            let log = try ModerationLog(path: path, config: ModerationLogConfig(), logger: nil)
            if let sender = args.value("--sender") { try narrow(&query, sender: sender, log: log) }
            records = try log.records(query)
        } catch let exit as CommandExit {
            throw exit
        } catch {
            throw .failure("\(error)")
        }
        if args.has("--json") {
            for record in records { print(JSONWriter.compact(record.jsonValue)) }
            return
        }
        if records.isEmpty {
            print("No matching records in \(path).")
            return
        }
        print(
            "time (UTC)".padding(toLength: 20) + "id".padding(toLength: 18) + "direction".padding(toLength: 15) + "channel".padding(toLength: 10)
                + "rule".padding(toLength: 19) + "sender".padding(toLength: 18) + "figure".padding(toLength: 34) + "text")
        for r in records {
            let sender = r.senderKey.count > 16 ? String(r.senderKey.prefix(16)) : r.senderKey
            let text = r.text.map { $0.count > 40 ? String($0.prefix(39)) + "…" : $0 } ?? "sha256:" + String(r.textSHA256.prefix(16))
            print(
                utcTime(r.judgedAt).padding(toLength: 20) + String(r.messageID.prefix(16)).padding(toLength: 18)
                    + r.direction.rawValue.padding(toLength: 15)
                    + String(r.channel.prefix(9)).padding(toLength: 10)
                    + (r.rule.label + (r.shadow ? "*" : "") + (r.releasedAt != nil ? "+" : "")).padding(toLength: 19)
                    + sender.padding(toLength: 18) + summary(r).padding(toLength: 34) + text.replacingNewlines())
        }
        if records.contains(where: \.shadow) { print("* shadow mode: logged, not hidden") }
        for r in records where r.releasedAt != nil {
            print("+ \(r.messageID.prefix(16)) released by \(r.releasedBy ?? "?") at \(utcTime(r.releasedAt ?? 0)) UTC")
        }
    }

    /// `--sender KEY`: the whole key or a prefix of at least 8 hex as the table shows it (``KeyPrefix``); `nostr:`
    /// narrows to Nostr senders (nostr-to-mesh), `mesh:` to mesh ones. A prefix matching several senders exits 64;
    /// one matching none lists nothing.
    static func narrow(_ query: inout ModerationQuery, sender: String, log: ModerationLog) throws(CommandExit) {
        let typed: KeyPrefix
        do {
            typed = try KeyPrefix(sender)
        } catch {
            throw CommandExit(error)
        }
        if let kind = typed.kind { query.direction = kind == .nostr ? .nostrToMesh : .meshToNostr }
        let senders: [String]
        do {
            senders = try log.senders(hexPrefix: typed.hex, limit: KeyPrefix.maxCandidates + 1)
        } catch {
            throw .failure("\(error)")
        }
        // No sender starts with it: nothing matches, and the listing says so.
        do {
            query.senderKey = senders.isEmpty ? typed.hex : try typed.unique(senders, describe: { $0 }, absent: "")
        } catch {
            throw CommandExit(error)
        }
    }

    /// The rule's key figure, from the stored figures JSON.
    static func summary(_ r: ModerationRecord) -> String {
        func n(_ v: JSONValue?) -> String {
            guard let d = v?.numberValue else { return "?" }
            return d == d.rounded() ? String(Int64(d)) : String((d * 1000).rounded() / 1000)
        }
        let f = r.figures
        switch r.rule {
        case .blocked:
            return "blocked " + (f["identity"]?.stringValue.map { String($0.prefix(24)) } ?? "?")
        case .denylist:
            guard case .object(let members) = f, let (kind, pattern) = members.first else { return "?" }
            return "\(kind) '\(pattern.stringValue ?? "?")'"
        case .spam(let rule):
            switch rule {
            case .messageRate, .characterRate, .linkRate:
                let key = rule == .messageRate ? "message_bucket" : rule == .characterRate ? "character_bucket" : "link_bucket"
                return "needs \(n(f[key]?["cost"])), has \(n(f[key]?["level"]))/\(n(f[key]?["capacity"]))"
            case .repeatedMessage, .crossUserCopy:
                let c = f[rule == .repeatedMessage ? "repeated" : "cross_user"]
                return "\(n(c?["count"])) copies, sim \(n(c?["best_similarity"]))"
            case .repeatedCharacters:
                return "A(\(n(f["autocorrelation"]?["shift"]))) = \(n(f["autocorrelation"]?["value"]))"
            }
        }
    }

    static func utcTime(_ unix: Double) -> String {
        var seconds = time_t(unix.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        String(map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}
