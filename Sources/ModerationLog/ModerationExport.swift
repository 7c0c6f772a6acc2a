import BotSupport
import SpamFilter
public import Moderation

/// What `bitchat-bridge modlog export` writes (incident reports): one record per line, oldest first.
public enum ModerationExportFormat: String, Sendable, CaseIterable {
    /// One JSON object per line, the fields of ``ModerationRecord/jsonValue`` plus `judged_at_utc`.
    case jsonl
    /// RFC 4180 CSV with a header line; `figures` is a compact JSON cell.
    case csv
}

/// Why an export range was refused; `field` names the option so the CLI's exit-64 message can too.
public enum ModerationExportRangeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is neither an ISO 8601 UTC time, `@UNIX`, `now`, nor a duration ago.
    case unreadableTime(field: String, text: String)
    /// The range is empty or backwards.
    case untilNotAfterSince(since: Double, until: Double)

    public var description: String {
        switch self {
        case .unreadableTime(let field, let text):
            "\(field) '\(text)' is not a time: use 2026-12-01, 2026-12-01T10:00:00Z (or ±HH:MM), @UNIX-SECONDS, now, or a duration ago (90s, 10m, 1h, 2d, 1w)"
        case .untilNotAfterSince(let since, let until):
            "--until (\(ModerationExport.utcTimestamp(until))) must be after --since (\(ModerationExport.utcTimestamp(since)))"
        }
    }

    /// The option the error is about.
    public var field: String {
        switch self {
        case .unreadableTime(let field, _): field
        case .untilNotAfterSince: "--until"
        }
    }
}

/// A half-open time range `[since, until)` in Unix seconds.
public struct ModerationExportRange: Sendable, Equatable {
    public var since: Double
    public var until: Double

    public init(since: Double, until: Double) throws(ModerationExportRangeError) {
        guard until > since else { throw .untilNotAfterSince(since: since, until: until) }
        self.since = since
        self.until = until
    }

    /// Reads the two options; `until` defaults to `now`. Each text is a time (see ``ModerationExport/parseTime(_:field:now:)``).
    public init(since: String, until: String?, now: Double) throws(ModerationExportRangeError) {
        let start = try ModerationExport.parseTime(since, field: "--since", now: now)
        let end = try until.map { (text) throws(ModerationExportRangeError) -> Double in
            try ModerationExport.parseTime(text, field: "--until", now: now)
        } ?? now
        try self.init(since: start, until: end)
    }
}

/// A moderation action in an export (issue 35: one report for the site): a block, a staff mark, a denylist word, a
/// release, a settings change — made on this bridge (console, CLI) or on another stage of the site (its site record,
/// a row of this bridge's audit) — with the stage that made it and who acted there.
public struct ModerationExportAction: Sendable, Equatable {
    /// Unix seconds.
    public var at: Double
    /// The stage that made it (its nickname).
    public var bridge: String
    /// `block`, `unblock`, `allow`, `denylist add`, `release`, …
    public var action: String
    public var target: String
    /// Who acted (`session:ana`, `cli:ops`, …).
    public var by: String

    public init(at: Double, bridge: String, action: String, target: String, by: String) {
        self.at = at
        self.bridge = bridge
        self.action = action
        self.target = target
        self.by = by
    }
}

/// The export codecs: pure, so the CSV quoting and redaction are tested without the CLI.
public enum ModerationExport {
    /// The CSV columns, in order. A hidden message's row fills the first sixteen, `record` (`hidden`) and `bridge`; an
    /// action's row (``ModerationExportAction``) fills `judged_at_utc`/`judged_at` with when it was made, `record`
    /// (`action`), `bridge`, `action`, `target` and `by`.
    public static let csvColumns = [
        "id", "judged_at_utc", "judged_at", "direction", "channel", "sender", "display_name", "message_id",
        "message_timestamp", "rule", "shadow", "figures", "text", "text_sha256", "released_at_utc", "released_by",
        "record", "bridge", "action", "target", "by",
    ]

    /// The record with its text removed when `redactText` (the SHA-256 stays, so copies can still be matched).
    public static func prepared(_ record: ModerationRecord, redactText: Bool) -> ModerationRecord {
        var record = record
        if redactText { record.text = nil }
        return record
    }

    /// One JSON line (no trailing newline): the record's fields, `judged_at_utc`, `record` (`hidden`) and `bridge`.
    public static func jsonLine(_ record: ModerationRecord, redactText: Bool, bridge: String = "") -> String {
        let r = prepared(record, redactText: redactText)
        var members = r.jsonValue.objectValue ?? []
        let at = members.firstIndex { $0.0 == "judged_at" }.map { $0 + 1 } ?? 0
        members.insert(("judged_at_utc", .string(utcTimestamp(r.judgedAt))), at: at)
        if redactText { members.append(("text_redacted", .bool(true))) }
        members += [("record", .string("hidden")), ("bridge", .string(bridge))]
        return JSONWriter.compact(.object(members))
    }

    /// One JSON line for a moderation action: `record` (`action`), `bridge`, `at`, `at_utc`, `action`, `target`, `by`.
    public static func jsonLine(_ action: ModerationExportAction) -> String {
        JSONWriter.compact(.object([
            ("record", .string("action")), ("bridge", .string(action.bridge)), ("at", .double(action.at)),
            ("at_utc", .string(utcTimestamp(action.at))), ("action", .string(action.action)), ("target", .string(action.target)),
            ("by", .string(action.by)),
        ]))
    }

    /// One CSV row for a moderation action (the columns ``csvColumns`` names; a hidden message's own are empty).
    public static func csvRow(_ action: ModerationExportAction) -> String {
        var cells = [String](repeating: "", count: csvColumns.count)
        cells[1] = utcTimestamp(action.at)
        cells[2] = number(action.at)
        cells[16...] = ["action", neutralised(action.bridge), neutralised(action.action), neutralised(action.target), neutralised(action.by)]
        return cells.map(csvField).joined(separator: ",")
    }

    /// The CSV header line (no trailing newline).
    public static var csvHeader: String { csvColumns.joined(separator: ",") }

    /// One CSV row (no trailing newline; rows are separated by CRLF as RFC 4180 says).
    public static func csvRow(_ record: ModerationRecord, redactText: Bool, bridge: String = "") -> String {
        let r = prepared(record, redactText: redactText)
        let cells: [String] = [
            r.id.map(String.init) ?? "", utcTimestamp(r.judgedAt), number(r.judgedAt), r.direction.rawValue,
            neutralised(r.channel), neutralised(r.senderKey), r.displayName.map(neutralised) ?? "", neutralised(r.messageID),
            number(r.messageTimestamp), r.rule.label, r.shadow ? "true" : "false", JSONWriter.compact(r.figures),
            r.text.map(neutralised) ?? "", r.textSHA256, r.releasedAt.map(utcTimestamp) ?? "", r.releasedBy.map(neutralised) ?? "",
            "hidden", neutralised(bridge), "", "", "",
        ]
        return cells.map(csvField).joined(separator: ",")
    }

    /// RFC 4180 §2: a field holding a comma, a double quote, CR or LF is enclosed in double quotes and each of its
    /// double quotes is doubled; any other field is written as is.
    public static func csvField(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 10 || $0 == 13 }) else {
            return text
        }
        var out = "\""
        for c in text.unicodeScalars {
            if c == "\"" { out += "\"\"" } else { out.unicodeScalars.append(c) }
        }
        return out + "\""
    }

    /// Free text that a spreadsheet would read as a formula (`=`, `+`, `-`, `@`, tab or CR first: OWASP's "CSV
    /// injection") gets a leading `'`: an incident report opened in a spreadsheet must not run a spammer's formula.
    public static func neutralised(_ text: String) -> String {
        guard let first = text.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) else { return text }
        return "'" + text
    }

    /// Shortest decimal that reads back to the same Double (integers without a fraction).
    static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    // MARK: Time

    /// Limits on what a time option may say.
    public enum Limits {
        /// Years outside 1970–9999 are refused: the log holds no older record and ISO 8601 needs four digits.
        public static let years = 1970...9999
    }

    /// Seconds since 1970 for a time option: `now`; `@1750000000` (Unix seconds, fraction allowed); ISO 8601
    /// `2026-12-01` (midnight UTC), `2026-12-01T10:00`, `…T10:00:00`, `…T10:00:00.5`, each with `Z` or `±HH:MM`
    /// (no zone means UTC), `T` or a space between date and time; or a duration ago: `90s`, `10m`, `1h`, `2d`, `1w`.
    public static func parseTime(_ text: String, field: String, now: Double) throws(ModerationExportRangeError) -> Double {
        let bad = ModerationExportRangeError.unreadableTime(field: field, text: text)
        if text == "now" { return now }
        if text.hasPrefix("@") {
            guard let v = Double(text.dropFirst()), v.isFinite, v >= 0 else { throw bad }
            return v
        }
        if let last = text.last, let unit = durationUnits[last], text.count > 1, !text.contains("-") {
            guard let v = Double(text.dropLast()), v.isFinite, v >= 0 else { throw bad }
            return now - v * unit
        }
        guard let t = parseISO8601(text) else { throw bad }
        return t
    }

    private static let durationUnits: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]

    /// ISO 8601 (the subset ``parseTime(_:field:now:)`` documents) → Unix seconds, nil if it is not one.
    static func parseISO8601(_ text: String) -> Double? {
        let b = Array(text.utf8)
        func digits(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var v = 0
            for i in from..<(from + count) {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                v = v * 10 + Int(b[i] - 48)
            }
            return v
        }
        guard let year = digits(0, 4), b.count >= 10, b[4] == UInt8(ascii: "-"), let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
            let day = digits(8, 2), Limits.years.contains(year), (1...12).contains(month),
            (1...CivilCalendar.daysIn(month: month, year: year)).contains(day)
        else { return nil }
        var seconds = Double(CivilCalendar.daysFromCivil(year: year, month: month, day: day)) * 86_400
        var i = 10
        if i == b.count { return seconds }
        guard b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: " "), let hour = digits(i + 1, 2), i + 3 < b.count,
            b[i + 3] == UInt8(ascii: ":"), let minute = digits(i + 4, 2), hour <= 23, minute <= 59
        else { return nil }
        seconds += Double(hour * 3600 + minute * 60)
        i += 6
        if i < b.count, b[i] == UInt8(ascii: ":") {
            guard let second = digits(i + 1, 2), second <= 59 else { return nil }
            seconds += Double(second)
            i += 3
            if i < b.count, b[i] == UInt8(ascii: ".") {
                var j = i + 1
                var scale = 0.1
                while j < b.count, b[j] >= 48, b[j] <= 57, j - i <= 9 {
                    seconds += Double(b[j] - 48) * scale
                    scale /= 10
                    j += 1
                }
                guard j > i + 1 else { return nil }
                i = j
            }
        }
        if i == b.count { return seconds }
        if b[i] == UInt8(ascii: "Z"), i + 1 == b.count { return seconds }
        guard b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-"), i + 6 == b.count, let oh = digits(i + 1, 2),
            b[i + 3] == UInt8(ascii: ":"), let om = digits(i + 4, 2), oh <= 23, om <= 59
        else { return nil }
        let offset = Double(oh * 3600 + om * 60)
        return b[i] == UInt8(ascii: "+") ? seconds - offset : seconds + offset
    }

    /// `2026-12-01T10:00:00Z` (fractions dropped).
    public static func utcTimestamp(_ unix: Double) -> String {
        let whole = Int64(unix.rounded(.down))
        let days = whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400
        let rest = Int(whole - days * 86_400)
        let (y, m, d) = CivilCalendar.civilFromDays(days)
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let year = String(y)
        return String(repeating: "0", count: max(0, 4 - year.count)) + year + "-\(two(m))-\(two(d))T"
            + "\(two(rest / 3600)):\(two(rest / 60 % 60)):\(two(rest % 60))Z"
    }
}
