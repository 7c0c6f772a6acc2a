import BotSupport
import Foundation
import ModerationLog
import SpamFilter
import Testing
import Moderation

@Suite("Moderation log export (CSV quoting, redaction, ranges, paging)")
struct ExportTests {
    func record(id: Int64? = 7, text: String? = "hello", displayName: String? = "dora", judgedAt: Double = 1_750_000_000.5)
        -> ModerationRecord
    {
        ModerationRecord(
            id: id, judgedAt: judgedAt, direction: .nostrToMesh, channel: "u4pruyd", senderKey: "abcd", displayName: displayName,
            messageID: "m1", messageTimestamp: 1_750_000_000, rule: .spam(.crossUserCopy), shadow: false,
            figures: .object([("cross_user", .object([("count", .integer(3)), ("best_similarity", .double(0.95))]))]),
            text: text, textSHA256: "ff00")
    }

    /// Splits one CSV document into rows of cells the way RFC 4180 §2 reads it (quoted fields may hold CRLF).
    func parseCSV(_ text: String) -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var cell = ""
        var quoted = false
        var chars = Array(text.unicodeScalars)[...]
        while let c = chars.popFirst() {
            if quoted {
                if c == "\"" {
                    if chars.first == "\"" { cell.unicodeScalars.append("\""); chars.removeFirst() } else { quoted = false }
                } else {
                    cell.unicodeScalars.append(c)
                }
            } else if c == "\"" {
                quoted = true
            } else if c == "," {
                row.append(cell); cell = ""
            } else if c == "\r", chars.first == "\n" {
                chars.removeFirst(); row.append(cell); rows.append(row); row = []; cell = ""
            } else {
                cell.unicodeScalars.append(c)
            }
        }
        if !cell.isEmpty || !row.isEmpty { row.append(cell); rows.append(row) }
        return rows
    }

    @Test func csvFieldsAreQuotedOnlyWhenRFC4180SaysSo() {
        #expect(ModerationExport.csvField("plain text") == "plain text")
        #expect(ModerationExport.csvField("a,b") == "\"a,b\"")
        #expect(ModerationExport.csvField("say \"hi\"") == "\"say \"\"hi\"\"\"")
        #expect(ModerationExport.csvField("two\nlines") == "\"two\nlines\"")
        #expect(ModerationExport.csvField("cr\rhere") == "\"cr\rhere\"")
        #expect(ModerationExport.csvField("") == "")
        #expect(ModerationExport.csvField("émoji 🎉") == "émoji 🎉")
    }

    @Test func csvRowsReadBackCellForCellWithTheHeader() {
        let nasty = "he said \"buy, now\"\r\nthen left"
        let row = ModerationExport.csvRow(record(text: nasty, displayName: "a,\"b\""), redactText: false)
        let document = ModerationExport.csvHeader + "\r\n" + row + "\r\n"
        let parsed = parseCSV(document)
        #expect(parsed.count == 2)
        #expect(parsed[0] == ModerationExport.csvColumns)
        let cells = Dictionary(uniqueKeysWithValues: zip(parsed[0], parsed[1]))
        #expect(cells["text"] == nasty)
        #expect(cells["display_name"] == "a,\"b\"")
        #expect(cells["id"] == "7")
        #expect(cells["judged_at_utc"] == "2025-06-15T15:06:40Z")
        #expect(cells["judged_at"] == "1750000000.5")
        #expect(cells["message_timestamp"] == "1750000000")
        #expect(cells["figures"] == #"{"cross_user":{"count":3,"best_similarity":0.95}}"#)
        #expect(cells["shadow"] == "false" && cells["rule"] == "crossUserCopy" && cells["direction"] == "nostr-to-mesh")
    }

    @Test("an action's row: when, record action, bridge, action, target, by — a hidden message's own cells empty; formula-looking cells neutralised")
    func actionRows() throws {
        let action = ModerationExportAction(at: 1_750_000_000, bridge: "stage-b", action: "denylist add", target: "=keyword:x", by: "session:ana")
        let row = parseCSV(ModerationExport.csvRow(action))[0]
        #expect(row.count == ModerationExport.csvColumns.count)
        let cells = Dictionary(uniqueKeysWithValues: zip(ModerationExport.csvColumns, row))
        #expect(cells["judged_at_utc"] == "2025-06-15T15:06:40Z" && cells["record"] == "action" && cells["bridge"] == "stage-b")
        #expect(cells["action"] == "denylist add" && cells["target"] == "'=keyword:x" && cells["by"] == "session:ana")
        #expect(cells["id"] == "" && cells["rule"] == "" && cells["text"] == "")
        let json = try JSONParser().parse(ModerationExport.jsonLine(action))
        #expect(json["record"] == .string("action") && json["bridge"] == .string("stage-b") && json["at_utc"] == .string("2025-06-15T15:06:40Z"))
        #expect(json["target"] == .string("=keyword:x"), "JSON is not a spreadsheet: as it is")
        let hidden = try JSONParser().parse(ModerationExport.jsonLine(record(text: "x"), redactText: false, bridge: "stage-a"))
        #expect(hidden["record"] == .string("hidden") && hidden["bridge"] == .string("stage-a"))
    }

    @Test func formulaTextIsNeutralisedInCSVButNotInJSON() {
        let row = parseCSV(ModerationExport.csvRow(record(text: "=HYPERLINK(\"http://x\")", displayName: "@admin"), redactText: false))[0]
        let cells = Dictionary(uniqueKeysWithValues: zip(ModerationExport.csvColumns, row))
        #expect(cells["text"] == "'=HYPERLINK(\"http://x\")")
        #expect(cells["display_name"] == "'@admin")
        let json = try? JSONParser().parse(ModerationExport.jsonLine(record(text: "=1+1"), redactText: false))
        #expect(json?["text"] == .string("=1+1"))
    }

    @Test func redactionDropsTheTextKeepsTheHashAndSaysSo() throws {
        let json = try JSONParser().parse(ModerationExport.jsonLine(record(text: "secret plan"), redactText: true))
        #expect(json["text"] == .null)
        #expect(json["text_sha256"] == .string("ff00"))
        #expect(json["text_redacted"] == .bool(true))
        #expect(json["judged_at_utc"] == .string("2025-06-15T15:06:40Z"))
        let plain = try JSONParser().parse(ModerationExport.jsonLine(record(text: "secret plan"), redactText: false))
        #expect(plain["text"] == .string("secret plan") && plain["text_redacted"] == nil)
        let csv = ModerationExport.csvRow(record(text: "secret plan"), redactText: true)
        #expect(!csv.contains("secret"))
        #expect(csv.contains("ff00"))
    }

    @Test func timesParseInEveryDocumentedForm() throws {
        let now = 1_750_000_000.0
        func t(_ s: String) throws -> Double { try ModerationExport.parseTime(s, field: "--since", now: now) }
        #expect(try t("now") == now)
        #expect(try t("@1700000000.25") == 1_700_000_000.25)
        #expect(try t("1h") == now - 3600)
        #expect(try t("2d") == now - 172_800)
        #expect(try t("1970-01-01") == 0)
        #expect(try t("2025-06-15") == 1_749_945_600)
        #expect(try t("2025-06-15T15:06:40Z") == 1_750_000_000)
        #expect(try t("2025-06-15 15:06:40") == 1_750_000_000)
        #expect(try t("2025-06-15T15:06") == 1_749_999_960)
        #expect(try t("2025-06-15T17:06:40+02:00") == 1_750_000_000)
        #expect(try t("2025-06-15T10:06:40.5-05:00") == 1_750_000_000.5)
        #expect(try t("2024-02-29") == 1_709_164_800)
        for bad in ["", "soon", "2025-02-29", "2025-13-01", "2025-06-15T24:00", "2025-06-15T10:00:00+2", "1750000000", "@-1", "-1h",
                    "2025-06-15T10:00:00Zjunk", "1969-12-31", "h"] {
            #expect(throws: ModerationExportRangeError.unreadableTime(field: "--since", text: bad), "\(bad)") { try t(bad) }
        }
        // The formatter and parser agree over a span of dates (leap years, century rules).
        for unix in stride(from: 0.0, to: 4_200_000_000, by: 7_777_777) {
            #expect(try t(ModerationExport.utcTimestamp(unix)) == unix)
        }
    }

    @Test func rangesMustRunForwardsAndNameTheField() throws {
        let now = 1_750_000_000.0
        let range = try ModerationExportRange(since: "2h", until: nil, now: now)
        #expect(range.since == now - 7200 && range.until == now)
        #expect(throws: ModerationExportRangeError.untilNotAfterSince(since: now - 60, until: now - 3600)) {
            try ModerationExportRange(since: "1m", until: "1h", now: now)
        }
        #expect(throws: ModerationExportRangeError.untilNotAfterSince(since: now, until: now)) {
            try ModerationExportRange(since: "now", until: "now", now: now)
        }
        do {
            _ = try ModerationExportRange(since: "1h", until: "tomorrow", now: now)
            Issue.record("accepted 'tomorrow'")
        } catch {
            #expect(error.field == "--until" && error.description.contains("--until 'tomorrow'"))
        }
    }

    @Test func forEachRecordPagesOldestFirstWithinTheRange() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("modlog-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let log = try ModerationLog(path: directory.appendingPathComponent("bridge.sqlite3").path, config: ModerationLogConfig(), logger: nil)
        for i in 0..<25 { try log.append(record(id: nil, text: "t\(i)", judgedAt: 1000 + Double(i))) }
        var seen: [String] = []
        let count = try log.forEachRecord(since: 1005, until: 1020, pageSize: 4) { seen.append($0.text ?? "") }
        #expect(count == 15)
        #expect(seen == (5..<20).map { "t\($0)" })
        #expect(try log.forEachRecord(since: 2000, until: 3000) { _ in } == 0)
        // The console's filters: search, channel, until, paging by id.
        var query = ModerationQuery(limit: 3)
        query.search = "t1"
        let hits = try log.records(query)
        #expect(hits.map(\.text) == ["t19", "t18", "t17"])
        query.beforeID = hits.last?.id
        #expect(try log.records(query).map(\.text) == ["t16", "t15", "t14"])
        query = ModerationQuery(limit: 100)
        query.search = "%"
        #expect(try log.records(query).isEmpty, "LIKE wildcards are taken literally")
        query = ModerationQuery(since: 1003, limit: 100)
        query.until = 1005
        query.channel = "u4pruyd"
        #expect(try log.records(query).map(\.text) == ["t4", "t3"])
        query.channel = "mesh"
        #expect(try log.records(query).isEmpty)
    }
}
