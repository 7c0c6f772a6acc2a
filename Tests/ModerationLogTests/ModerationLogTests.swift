import Testing
import BotProcess
import BotStorage
import BotSupport
import Foundation
import ModerationLog
import SpamFilter
import Moderation

@Suite("Moderation log (SQLite, retention, JSON lines)")
struct ModerationLogTests {
    let now = 1_750_000_000.0

    func temporaryDatabase() -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("modlog-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.appendingPathComponent("bridge.sqlite3").path
    }

    /// A real hidden verdict from the filter: the 4th sender posting the same line.
    func hiddenCopy(shadow: Bool = false) -> (SpamCandidate, SpamVerdict) {
        var config = SpamFilterConfig()
        config.shadowMode = shadow
        var policy = AdmissionPolicy(config: config)
        for (i, sender) in ["a", "b", "c"].enumerated() {
            _ = policy.judge(
                SpamCandidate(senderKey: sender, messageID: "x\(i)", timestamp: now, content: .text("happy new year everyone"), direction: .nostrToMesh),
                now: now)
        }
        let candidate = SpamCandidate(senderKey: "d", messageID: "x9", timestamp: now - 5, content: .text("Happy new year everyone!"), direction: .nostrToMesh)
        return (candidate, policy.judge(candidate, now: now))
    }

    @Test func recordsHiddenMessagesWithRuleFiguresAndTextAndEmitsAJSONLine() throws {
        let path = temporaryDatabase()
        let sink = InMemoryLogSink()
        let log = try ModerationLog(path: path, config: ModerationLogConfig(), logger: Logger(label: "modlog", sink: sink))
        let (candidate, verdict) = hiddenCopy()
        let record = try #require(
            ModerationRecord(candidate: candidate, verdict: verdict, channel: "u4pruyd", displayName: "dora", judgedAt: now, logText: true))
        let id = try log.append(record)
        let stored = try log.records(ModerationQuery())
        #expect(stored.count == 1)
        let first = try #require(stored.first)
        #expect(first.id == id && first.rule == .spam(.crossUserCopy) && first.text == "Happy new year everyone!")
        #expect(first.channel == "u4pruyd" && first.displayName == "dora" && first.messageID == "x9" && first.messageTimestamp == now - 5)
        #expect(first.figures["cross_user"]?["count"] == .integer(3))
        #expect(first.textSHA256 == sha256Hex("Happy new year everyone!"))
        let lines = sink.all
        #expect(lines.count == 1)
        let line = try JSONParser().parse(try #require(lines.first).jsonLine)
        #expect(line["modlog.rule"] == .string("crossUserCopy"))
        #expect(line["modlog.message_id"] == .string("x9"))
        // Durable: a second connection (another process) reads the same record.
        let reopened = try ModerationLog(path: path, config: ModerationLogConfig(), logger: nil)
        #expect(try reopened.count() == 1)
    }

    @Test func acceptedVerdictsMakeNoRecordAndShadowVerdictsAreMarked() throws {
        let accepted = SpamVerdict(outcome: .accepted, rule: nil, figures: SpamFigures(), fromCache: false)
        let candidate = SpamCandidate(senderKey: "a", messageID: "1", timestamp: now, content: .text("hi"), direction: .meshToNostr)
        #expect(ModerationRecord(candidate: candidate, verdict: accepted, channel: "mesh", displayName: nil, judgedAt: now, logText: true) == nil)
        let (c, v) = hiddenCopy(shadow: true)
        #expect(v.outcome == .wouldHide)
        let record = try #require(ModerationRecord(candidate: c, verdict: v, channel: "mesh", displayName: nil, judgedAt: now, logText: true))
        #expect(record.shadow)
    }

    @Test func withLogTextOffOnlyTheHashIsStored() throws {
        var config = ModerationLogConfig()
        config.logText = false
        let log = try ModerationLog(path: temporaryDatabase(), config: config, logger: nil)
        let (candidate, verdict) = hiddenCopy()
        let record = try #require(ModerationRecord(candidate: candidate, verdict: verdict, channel: "mesh", displayName: nil, judgedAt: now, logText: true))
        try log.append(record)
        let stored = try #require(try log.records(ModerationQuery()).first)
        #expect(stored.text == nil)
        #expect(stored.textSHA256 == record.textSHA256)
        // SHA-256("Happy new year everyone!") computed independently below.
        #expect(stored.textSHA256 == sha256Hex("Happy new year everyone!"))
    }

    @Test func queriesFilterBySinceRuleDirectionSenderAndLimitNewestFirst() throws {
        let log = try ModerationLog(path: temporaryDatabase(), config: ModerationLogConfig(), logger: nil)
        for i in 0..<20 {
            try log.append(
                ModerationRecord(
                    judgedAt: now + Double(i), direction: i % 2 == 0 ? .nostrToMesh : .meshToNostr, channel: "mesh",
                    senderKey: "s\(i % 3)", displayName: nil, messageID: "m\(i)", messageTimestamp: now,
                    rule: i % 4 == 0 ? .spam(.messageRate) : .spam(.linkRate), shadow: false, figures: .object([]), text: "t", textSHA256: "00"))
        }
        #expect(try log.records(ModerationQuery(limit: 5)).map(\.messageID) == ["m19", "m18", "m17", "m16", "m15"])
        #expect(try log.records(ModerationQuery(since: now + 15)).count == 5)
        #expect(try log.records(ModerationQuery(rule: .spam(.messageRate))).count == 5)
        #expect(try log.records(ModerationQuery(direction: .meshToNostr)).count == 10)
        #expect(try log.records(ModerationQuery(senderKey: "s0")).count == 7)
        #expect(try log.records(ModerationQuery(rule: .spam(.messageRate), direction: .nostrToMesh, senderKey: "s0")).map(\.messageID) == ["m12", "m0"])
    }

    @Test func retentionByAgeAndCount() throws {
        var config = ModerationLogConfig()
        config.maxRecords = 10
        config.retentionSeconds = 3600
        let log = try ModerationLog(path: temporaryDatabase(), config: config, logger: nil)
        for i in 0..<30 {
            try log.append(
                ModerationRecord(
                    judgedAt: now + Double(i) * 600, direction: .nostrToMesh, channel: "mesh", senderKey: "s", displayName: nil,
                    messageID: "m\(i)", messageTimestamp: now, rule: .spam(.messageRate), shadow: false, figures: .object([]), text: nil,
                    textSHA256: "00"))
        }
        // By count: 10 kept (n), the 11th newest goes (n+1).
        #expect(try log.prune(now: now) == 20)
        #expect(try log.count() == 10)
        #expect(try log.records(ModerationQuery()).last?.messageID == "m20")
        // By age: at the last record's time, only the last hour (7 records at 600 s spacing, inclusive) stays.
        try log.prune(now: now + 29 * 600)
        #expect(try log.records(ModerationQuery()).map(\.messageID) == (23...29).reversed().map { "m\($0)" })
    }

    @Test func appendPrunesByCountOnItsOwn() throws {
        var config = ModerationLogConfig()
        config.maxRecords = 50
        let log = try ModerationLog(path: temporaryDatabase(), config: config, logger: nil)
        for i in 0..<(ModerationLog.Limits.pruneInterval + 10) {
            try log.append(
                ModerationRecord(
                    judgedAt: now, direction: .nostrToMesh, channel: "mesh", senderKey: "s", displayName: nil, messageID: "m\(i)",
                    messageTimestamp: now, rule: .spam(.messageRate), shadow: false, figures: .object([]), text: nil, textSHA256: "00"))
        }
        #expect(try log.count() == 60)
    }

    @Test func sharesTheDatabaseAndRecordsItsSchemaVersion() throws {
        let path = temporaryDatabase()
        _ = try ModerationLog(path: path, config: ModerationLogConfig(), logger: nil)
        let db = try SQLiteDatabase(path: path)
        #expect(try db.prepare("SELECT version FROM schema_versions WHERE component = 'modlog'").query { $0.int64(0) } == [2])
        #expect(try db.prepare("PRAGMA journal_mode").query { $0.text(0) } == ["wal"])
        try db.execute("UPDATE schema_versions SET version = 3 WHERE component = 'modlog'")
        #expect(throws: ModerationLogError.newerSchema(found: 3, supported: 2)) {
            _ = try ModerationLog(path: path, config: ModerationLogConfig(), logger: nil)
        }
    }

    /// Issue 23 finding 4: released rows looked hidden. A release marks every row of the message once (who, when);
    /// the JSON and the export carry the mark.
    @Test func releaseMarksTheRowsOnceAndTheExportShowsIt() throws {
        let log = try ModerationLog(path: temporaryDatabase(), config: ModerationLogConfig(), logger: nil)
        let (candidate, verdict) = hiddenCopy()
        let record = try #require(
            ModerationRecord(candidate: candidate, verdict: verdict, channel: "u4pruyd", displayName: nil, judgedAt: now, logText: true))
        try log.append(record)
        #expect(try log.records(ModerationQuery()).first?.releasedAt == nil)
        #expect(try log.markReleased(messageID: "x9", at: now + 60, by: "cli") == 1)
        #expect(try log.markReleased(messageID: "x9", at: now + 90, by: "console") == 0, "released once: the first mark stays")
        let stored = try #require(try log.records(ModerationQuery()).first)
        #expect(stored.releasedAt == now + 60 && stored.releasedBy == "cli")
        #expect(stored.jsonValue["released_by"] == .string("cli"))
        #expect(ModerationExport.csvHeader.contains(",released_at_utc,released_by,"))
        #expect(ModerationExport.csvRow(stored, redactText: false, bridge: "stage-a").hasSuffix(",\(ModerationExport.utcTimestamp(now + 60)),cli,hidden,stage-a,,,"))
    }

    /// A database written before the release marks (schema 1) opens, keeps its rows, and takes marks.
    @Test func aVersionOneDatabaseIsUpgradedKeepingItsRows() throws {
        let path = temporaryDatabase()
        let db = try SQLiteDatabase(path: path)
        try db.execute(
            """
            CREATE TABLE schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL);
            INSERT INTO schema_versions VALUES ('modlog', 1);
            CREATE TABLE modlog_records(id INTEGER PRIMARY KEY AUTOINCREMENT, judged_at REAL NOT NULL, direction TEXT NOT NULL,
              channel TEXT NOT NULL, sender TEXT NOT NULL, display_name TEXT, message_id TEXT NOT NULL, message_ts REAL NOT NULL,
              rule TEXT NOT NULL, shadow INTEGER NOT NULL, figures TEXT NOT NULL, text TEXT, text_sha256 TEXT NOT NULL);
            INSERT INTO modlog_records(judged_at, direction, channel, sender, message_id, message_ts, rule, shadow, figures, text, text_sha256)
              VALUES (1750000000, 'nostr-to-mesh', 'u4pruy', 'ab', 'm1', 1750000000, 'messageRate', 0, '{}', 'old row', '00');
            """)
        db.close()
        let log = try ModerationLog(path: path, config: ModerationLogConfig(), logger: nil)
        let rows = try log.records(ModerationQuery())
        #expect(rows.map(\.text) == ["old row"] && rows.first?.releasedAt == nil)
        #expect(try log.markReleased(messageID: "m1", at: now, by: "console") == 1)
    }

    @Test func configFromJSONNamesTheBadField() throws {
        let config = try ModerationLogConfig(json: try JSONParser().parse(#"{"log_text": false, "retention_days": 7, "max_records": 500}"#))
        #expect(!config.logText && config.retentionSeconds == 7 * 86_400 && config.maxRecords == 500)
        #expect(throws: SpamConfigError.wrongType(field: "modlog.log_text", expected: "true or false")) {
            try ModerationLogConfig(json: try JSONParser().parse(#"{"log_text": "no"}"#))
        }
        #expect(throws: Never.self) { try ModerationLogConfig(json: try JSONParser().parse(#"{"max_records": 10000000}"#)) }
        #expect(throws: SpamConfigError.outOfRange(field: "modlog.max_records", reason: "must be between 1 and 10000000")) {
            try ModerationLogConfig(json: try JSONParser().parse(#"{"max_records": 10000001}"#))
        }
        #expect(throws: SpamConfigError.unknownField(field: "modlog.retention")) {
            try ModerationLogConfig(json: try JSONParser().parse(#"{"retention": 3}"#))
        }
    }

    func sha256Hex(_ text: String) -> String {
        let result = try? ChildProcess.run("/usr/bin/sha256sum", [], input: text)
        return result?.stdout.split(separator: " ").first.map(String.init) ?? ""
    }
}
