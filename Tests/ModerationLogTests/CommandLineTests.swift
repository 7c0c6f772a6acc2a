import BotProcess
import BotSupport
import Foundation
import ModerationLog
import SpamFilter
import Testing
import Moderation

/// Runs the built `bitchat-bridge` (next to the test bundle in the build directory) end to end.
@Suite("bitchat-bridge spam / modlog / bench spam")
struct CommandLineTests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static var binary: String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // The test runner may be inside the .xctest bundle; walk up to the build products directory.
        for _ in 0..<4 where !FileManager.default.fileExists(atPath: directory.appendingPathComponent("bitchat-bridge").path) {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("bitchat-bridge").path
    }

    func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        let result = try ChildProcess.run(Self.binary, arguments, environment: environment)
        return Run(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }

    func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spamcli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    func lines(_ text: String) throws -> [JSONValue] {
        try text.split(separator: "\n").map { try JSONParser().parse(String($0)) }
    }

    @Test func binaryIsBuilt() {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary), "missing \(Self.binary)")
    }

    @Test func spamCheckJudgesARecordedStreamLineByLine() throws {
        let directory = try temporaryDirectory()
        let file = directory.appendingPathComponent("stream.jsonl")
        let base = 1_750_000_000
        var input = ""
        for (i, sender) in ["a", "b", "c", "d"].enumerated() {
            input += #"{"id":"h\#(i)","sender":"\#(sender)","created_at":\#(base + i),"text":"happy new year everyone"}"# + "\n"
        }
        input += #"{"id":"h3","sender":"d","created_at":\#(base + 3),"text":"happy new year everyone"}"# + "\n"  // re-delivery
        input += "\n"  // blank: skipped
        input += #"{"id":"att","sender":"m","created_at":\#(base),"received_at":\#(base + 5),"attachment":true,"direction":"mesh-to-nostr"}"# + "\n"
        input += #"{"id":"bad","sender":"m"}"# + "\n"
        input += "{not json\n"
        try input.write(to: file, atomically: true, encoding: .utf8)
        let result = try run(["spam", "check", "--jsonl", file.path])
        #expect(result.status == 1)
        let out = try lines(result.stdout)
        #expect(out.count == 8)
        #expect(out.prefix(3).allSatisfy { $0["hidden"] == .bool(false) })
        #expect(out[3]["rule"] == .string("crossUserCopy") && out[3]["hidden"] == .bool(true))
        #expect(out[3]["figures"]?["cross_user"]?["count"] == .integer(3))
        #expect(out[4]["cached"] == .bool(true) && out[4]["id"] == .string("h3"))
        #expect(out[5]["id"] == .string("att") && out[5]["outcome"] == .string("accepted"))
        #expect(out[6]["error"] == .string("missing 'created_at'") && out[6]["line"] == .integer(8))
        #expect(out[7]["id"] == .null && out[7]["error"] != nil)
        // A clean stream exits 0.
        let clean = directory.appendingPathComponent("clean.jsonl")
        try String(input.split(separator: "\n").prefix(4).joined(separator: "\n")).write(to: clean, atomically: true, encoding: .utf8)
        #expect(try run(["spam", "check", "--jsonl", clean.path]).status == 0)
    }

    @Test func spamCheckUsesAConfigFileAndRejectsABadOne() throws {
        let directory = try temporaryDirectory()
        let stream = directory.appendingPathComponent("s.jsonl")
        try (0..<3).map { #"{"id":"m\#($0)","sender":"a","created_at":1750000000,"text":"line \#($0) qwerty"}"# }
            .joined(separator: "\n").write(to: stream, atomically: true, encoding: .utf8)
        let config = directory.appendingPathComponent("bridge.json")
        try #"{"spam": {"message_bucket": {"capacity": 2}}}"#.write(to: config, atomically: true, encoding: .utf8)
        let out = try lines(try run(["spam", "check", "--jsonl", stream.path, "--config", config.path]).stdout)
        #expect(out.map { $0["rule"] } == [.null, .null, .string("messageRate")])
        try #"{"spam": {"message_bucket": {"capacity": 0}}}"#.write(to: config, atomically: true, encoding: .utf8)
        let bad = try run(["spam", "check", "--jsonl", stream.path, "--config", config.path])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("spam.message_bucket.capacity"))
    }

    @Test func spamExplainShowsEveryRuleAndTheVerdict() throws {
        let result = try run(["spam", "explain", "BUY NOW buy now buy now buy now buy now", "--json"])
        #expect(result.status == 0)
        let json = try JSONParser().parse(result.stdout)
        #expect(json["verdict"] == .string("repeatedCharacters"))
        #expect(json["normalized"] == .string("buy now buy now buy now buy now buy now"))
        #expect(json["figures"]?["autocorrelation"]?["value"]?.numberValue == 1)
        let table = try run(["spam", "explain", "hello there"])
        for rule in SpamRule.allCases { #expect(table.stdout.contains(rule.rawValue)) }
        #expect(table.stdout.contains("verdict: accepted"))
        // With a history: the same sender's third near-copy.
        let directory = try temporaryDirectory()
        let history = directory.appendingPathComponent("h.jsonl")
        try [#"{"id":"1","sender":"k","created_at":1750000000,"text":"anyone got a spare tent peg"}"#,
             #"{"id":"2","sender":"k","created_at":1750000030,"text":"anyone got a spare tent peg?"}"#]
            .joined(separator: "\n").write(to: history, atomically: true, encoding: .utf8)
        let repeated = try JSONParser().parse(
            try run(["spam", "explain", "anyone got a spare tent peg??", "--sender", "k", "--history", history.path, "--json"]).stdout)
        #expect(repeated["verdict"] == .string("repeatedMessage"))
        #expect(repeated["history_lines"] == .integer(2))
    }

    @Test func modlogReadsTheBridgeDatabaseWithFilters() throws {
        let directory = try temporaryDirectory()
        let empty = try run(["modlog", "--data-dir", directory.path])
        #expect(empty.status == 0 && empty.stdout.contains("No moderation log yet"))
        let log = try ModerationLog(path: directory.appendingPathComponent("bridge.sqlite3").path, config: ModerationLogConfig(), logger: nil)
        let now = Date().timeIntervalSince1970
        // Sender keys as the bridge writes them (64 hex); the first two share their first 8 hex.
        let senders = ["aaaaaaaa1" + String(repeating: "0", count: 55), "aaaaaaaa2" + String(repeating: "0", count: 55),
                       "bbbbbbbb3" + String(repeating: "0", count: 55)]
        for (i, rule) in [HideRule.spam(.messageRate), .spam(.crossUserCopy), .spam(.crossUserCopy)].enumerated() {
            try log.append(
                ModerationRecord(
                    judgedAt: now - Double(i) * 7200, direction: i == 0 ? .meshToNostr : .nostrToMesh, channel: "u4pruyd",
                    senderKey: senders[i], displayName: nil, messageID: "id\(i)", messageTimestamp: now, rule: rule, shadow: i == 2,
                    figures: .object([("cross_user", .object([("count", .integer(3)), ("best_similarity", .double(0.95))]))]),
                    text: "text \(i)", textSHA256: "ab"))
        }
        let all = try lines(try run(["modlog", "--data-dir", directory.path, "--json"]).stdout)
        #expect(all.map { $0["message_id"] } == [.string("id2"), .string("id1"), .string("id0")])
        let recent = try lines(try run(["modlog", "--data-dir", directory.path, "--json", "--since", "3h"]).stdout)
        #expect(recent.count == 2)
        let byRule = try lines(try run(["modlog", "--data-dir", directory.path, "--json", "--rule", "crossUserCopy", "--limit", "1"]).stdout)
        #expect(byRule.map { $0["message_id"] } == [.string("id2")])
        let byDirection = try lines(try run(["modlog", "--data-dir", directory.path, "--json", "--direction", "mesh→nostr"]).stdout)
        #expect(byDirection.map { $0["message_id"] } == [.string("id0")])
        // --sender: the whole key, or at least 8 hex of it as the table shows (issue 23 finding 5), with its side.
        for sender in [senders[1], "aaaaaaaa2", "AAAAAAAA20", "nostr:aaaaaaaa2"] {
            let bySender = try lines(try run(["modlog", "--data-dir", directory.path, "--json", "--sender", sender]).stdout)
            #expect(bySender.map { $0["message_id"] } == [.string("id1")], "\(sender)")
        }
        #expect(try run(["modlog", "--data-dir", directory.path, "--json", "--sender", "mesh:aaaaaaaa2"]).stdout.isEmpty)
        #expect(try run(["modlog", "--data-dir", directory.path, "--json", "--sender", "cccccccc"]).stdout.isEmpty)
        let ambiguous = try run(["modlog", "--data-dir", directory.path, "--sender", "aaaaaaaa"])
        #expect(ambiguous.status == 64 && ambiguous.stderr.contains("matches 2 keys") && ambiguous.stderr.contains(senders[0]), "\(ambiguous.stderr)")
        let short = try run(["modlog", "--data-dir", directory.path, "--sender", "aaaa"])
        #expect(short.status == 64 && short.stderr.contains("at least 8 hex"), "\(short.stderr)")
        let table = try run(["modlog", "--data-dir", directory.path])
        #expect(table.stdout.contains("crossUserCopy*") && table.stdout.contains("3 copies, sim 0.95") && table.stdout.contains("shadow mode"))
        #expect(try run(["modlog", "--data-dir", directory.path, "--rule", "nope"]).status == 64)
        #expect(try run(["modlog", "--data-dir", directory.path, "--since", "soon"]).status == 64)
        #expect(try run(["modlog", "--data-dir", directory.path, "--limit", "0"]).status == 64)
        #expect(try run(["modlog", "--data-dir", directory.path, "--limit", "1000000"]).status == 0)
        #expect(try run(["modlog", "--data-dir", directory.path, "--limit", "1000001"]).status == 64)
        // Release goes through the running bridge: none runs here, and the error names where it looked.
        let release = try run(["modlog", "release", "id1", "--data-dir", directory.path])
        #expect(release.status == 1 && release.stderr.contains("no bridge is running") && release.stderr.contains(directory.path), "\(release.stderr)")
        #expect(try run(["modlog", "release", "--data-dir", directory.path]).status == 64, "ID is required")
    }

    @Test("issue 35: the table shows each message's id as 16 hex, and modlog release takes that (any unique prefix of ≥ 8 hex); a prefix of none or of several exits 64 naming what to do")
    func releaseTakesTheIDTheTableShows() throws {
        let directory = try temporaryDirectory()
        let log = try ModerationLog(path: directory.appendingPathComponent("bridge.sqlite3").path, config: ModerationLogConfig(), logger: nil)
        // A Nostr event id (64 hex) and two mesh message ids (32 hex) sharing their first 8.
        let ids = ["4f1c2d3e" + String(repeating: "a", count: 56), "9a8b7c6d1" + String(repeating: "0", count: 23),
                   "9a8b7c6d2" + String(repeating: "0", count: 23)]
        for (i, id) in ids.enumerated() {
            try log.append(
                ModerationRecord(
                    judgedAt: Date().timeIntervalSince1970 - Double(i), direction: .nostrToMesh, channel: "u4pruy", senderKey: "s\(i)",
                    displayName: nil, messageID: id, messageTimestamp: 0, rule: .spam(.messageRate), shadow: false, figures: .object([]),
                    text: "line \(i)", textSHA256: "h"))
        }
        let table = try run(["modlog", "--data-dir", directory.path])
        #expect(table.stdout.contains("id  ") && table.stdout.contains(String(ids[0].prefix(16))) && !table.stdout.contains(ids[0]), "\(table.stdout)")
        // The shown id resolves (then, with no bridge running, the control socket is what fails).
        let shown = try run(["modlog", "release", String(ids[0].prefix(16)), "--data-dir", directory.path])
        #expect(shown.status == 1 && shown.stderr.contains("no bridge is running"), "\(shown.stderr)")
        let none = try run(["modlog", "release", "deadbeef", "--data-dir", directory.path])
        #expect(none.status == 64 && none.stderr.contains("starts with 'deadbeef'") && none.stderr.contains("as `bitchat-bridge modlog` shows it"), "\(none.stderr)")
        let several = try run(["modlog", "release", "9A8B7C6D", "--data-dir", directory.path])
        #expect(several.status == 64 && several.stderr.contains("matches 2 messages") && several.stderr.contains(ids[2]), "\(several.stderr)")
        let whole = try run(["modlog", "release", ids[1], "--data-dir", directory.path])
        #expect(whole.status == 1 && whole.stderr.contains("no bridge is running"), "the whole id: \(whole.stderr)")
    }

    @Test func modlogExportWritesJSONLAndCSVAndRefusesBadRanges() throws {
        let directory = try temporaryDirectory()
        let log = try ModerationLog(path: directory.appendingPathComponent("bridge.sqlite3").path, config: ModerationLogConfig(), logger: nil)
        let base = 1_750_000_000.0
        for i in 0..<3 {
            try log.append(
                ModerationRecord(
                    judgedAt: base + Double(i) * 3600, direction: .nostrToMesh, channel: "u4pruyd", senderKey: "s\(i)",
                    displayName: "n\(i)", messageID: "id\(i)", messageTimestamp: base, rule: .spam(.messageRate), shadow: false,
                    figures: .object([]), text: "buy, \"now\" \(i)", textSHA256: "h\(i)"))
        }
        let dir = ["--data-dir", directory.path]
        let jsonl = try run(["modlog", "export", "--since", "@\(Int(base))", "--until", "2025-06-15T17:06:40Z"] + dir)
        #expect(jsonl.status == 0, "\(jsonl.stderr)")
        let out = try lines(jsonl.stdout)
        #expect(out.map { $0["message_id"] } == [.string("id0"), .string("id1")], "oldest first, until exclusive")
        #expect(out[0]["text"] == .string("buy, \"now\" 0"))
        #expect(jsonl.stderr.contains("2 hidden records and 0 actions"), "\(jsonl.stderr)")
        let csv = try run(["modlog", "export", "--since", "2025-06-15", "--format", "csv", "--redact-text"] + dir)
        #expect(csv.status == 0, "\(csv.stderr)")
        let rows = csv.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(rows.count == 4)
        #expect(rows[0] == ModerationExport.csvHeader)
        #expect(!csv.stdout.contains("buy"))
        let file = directory.appendingPathComponent("report.csv")
        let toFile = try run(["modlog", "export", "--since", "2025-06-15", "--format", "csv", "--output", file.path] + dir)
        #expect(toFile.status == 0 && toFile.stdout.isEmpty)
        #expect(try String(contentsOf: file, encoding: .utf8).contains("\"buy, \"\"now\"\" 2\""))
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // Bad invocations: exit 64, naming the option.
        for (arguments, field) in [
            (["--since", "soon"], "--since"), (["--since", "1h", "--until", "later"], "--until"),
            (["--since", "1m", "--until", "1h"], "--until"), (["--until", "now"], "--since"),
            (["--since", "1h", "--format", "xml"], "--format"),
        ] {
            let bad = try run(["modlog", "export"] + arguments + dir)
            #expect(bad.status == 64, "\(arguments)")
            #expect(bad.stderr.contains(field), "\(arguments): \(bad.stderr)")
        }
        #expect(try run(["modlog", "export", "--since", "1h", "--limit", "3"] + dir).status == 64)
        // The old form still works beside the new subcommand.
        #expect(try run(["modlog", "--json", "--limit", "1"] + dir).status == 0)
        #expect(try run(["modlog", "export", "--help"]).stdout.contains("--redact-text"))
    }

    @Test func benchSpamQuickPrintsTheBenchJSON() throws {
        let result = try run(["bench", "spam", "--quick", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try JSONParser().parse(result.stdout)
        #expect(json["bench"] == .string("spam"))
        for name in ["ordinary", "flood", "junk"] {
            let metrics = try #require(json["cases"]?[name])
            for metric in ["median_us", "p99_us", "reference_median_us", "speedup", "messages"] {
                #expect(metrics[metric]?.numberValue != nil, "\(name).\(metric)")
            }
            #expect(metrics["verdict_mismatches"] == .integer(0))
        }
        #expect(json["cases"]?["memory"]?["tracked_senders"]?.numberValue.map { $0 <= 4096 } == true)
    }

    /// `bench identities --quick`: every case and metric of BENCH.md, the cap pass timed on fresh copies.
    @Test func benchIdentitiesQuickPrintsTheBenchJSON() throws {
        let result = try run(["bench", "identities", "--quick", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try JSONParser().parse(result.stdout)
        #expect(json["bench"] == .string("identities"))
        for name in ["store_2000", "store_5000", "blob_2000"] {
            let metrics = try #require(json["cases"]?[name], "\(name)")
            for metric in [
                "first_contact_write_us", "refresh_us", "lookup_us", "launch_to_first_lookup_ms", "daily_pass_ms",
                "cap_pass_ms", "cap_pass_min_ms", "cap_pass_max_ms",
            ] {
                #expect(metrics[metric]?.numberValue != nil, "\(name).\(metric)")
            }
            #expect(metrics["cap_pass_evicted"]?.numberValue == 501, "\(name)")
        }
        for name in ["store_2000", "blob_2000"] {
            #expect(json["cases"]?[name]?["cap_pass_runs"]?.numberValue == 3, "\(name): fresh copies in quick mode")
            let metrics = try #require(json["cases"]?[name])
            let low = try #require(metrics["cap_pass_min_ms"]?.numberValue)
            let median = try #require(metrics["cap_pass_ms"]?.numberValue)
            let high = try #require(metrics["cap_pass_max_ms"]?.numberValue)
            #expect(low <= median && median <= high, "\(name)")
        }
    }
}
