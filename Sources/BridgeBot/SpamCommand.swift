import BridgeApp
import BotSupport
import SpamFilter

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge spam explain|check`: the spam filter offline, for operators tuning limits.
enum SpamCommand {
    static let explainSpec = CommandSpec(
        path: "spam explain",
        summary: "Show every spam rule's figure for a text and which rule would fire.",
        positionals: [.text("TEXT")],
        options: [
            .value("--sender", "KEY", "Sender key the text comes from (default: a sender with no history)."),
            .value("--history", "FILE", "Recorded stream (JSON lines, as for 'spam check') judged first, in order."),
            .value("--config", "FILE", "JSON file with the spam settings (the bridge config's \"spam\" object)."),
            .flag("--json", "Print one JSON object."),
        ],
        details: "The text is judged as arriving at the last history line's received_at (or now), stamped then."
    )

    static let checkSpec = CommandSpec(
        path: "spam check",
        summary: "Judge a recorded stream and print one verdict per line (JSON lines).",
        options: [
            .required("--jsonl", "FILE", "One candidate per line: id, sender, created_at, [received_at], text|attachment, [direction]."),
            .value("--config", "FILE", "JSON file with the spam settings (the bridge config's \"spam\" object)."),
        ],
        details: "Blank lines are skipped. An invalid line prints {\"line\": N, \"id\": …, \"error\": …}; the exit status is then 1."
    )

    static let group = CommandGroup(
        name: "spam",
        summary: "Explain the spam filter's verdict on a text, or judge a recorded stream (JSON lines).",
        subcommands: [Subcommand("explain", explainSpec, run: explain), Subcommand("check", checkSpec, run: check)])

    static func loadConfig(_ path: String?) throws(CommandExit) -> SpamFilterConfig {
        guard let path else { return SpamFilterConfig() }
        let bytes: [UInt8]
        do {
            bytes = try FileIO.read(path, maxBytes: 1 << 20)
        } catch {
            throw .failure(error.description)
        }
        do {
            let json = try JSONParser().parse(bytes)
            // Accept either the spam object itself or a whole bridge config with a "spam" key.
            if let inner = json["spam"] { return try SpamFilterConfig(json: inner) }
            return try SpamFilterConfig(json: json)
        } catch let error as SpamConfigError {
            throw .usage("\(path): \(error)")
        } catch {
            throw .usage("\(path): not valid JSON (\(error))")
        }
    }

    /// The stream's lines (1-based numbers), blank lines dropped.
    static func readLines(_ path: String) throws(CommandExit) -> [(number: Int, text: String)] {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.read(path, maxBytes: 1 << 30)
        } catch {
            throw .failure(error.description)
        }
        var lines: [(Int, String)] = []
        var number = 0
        for slice in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            number += 1
            let text = String(decoding: slice, as: UTF8.self)
            if text.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\r" }) { continue }
            lines.append((number, text))
        }
        return lines
    }

    static func check(_ args: ParsedArguments) throws(CommandExit) {
        guard let path = args.value("--jsonl") else { throw .usage("missing --jsonl FILE") }
        var policy = AdmissionPolicy(config: try loadConfig(args.value("--config")))
        var invalid = 0
        for (number, text) in try readLines(path) {
            do {
                let recorded = try RecordedCandidate(line: text)
                let verdict = policy.judge(recorded.candidate, now: recorded.receivedAt)
                print(JSONWriter.compact(.object([("id", .string(recorded.candidate.messageID))] + verdict.jsonMembers)))
            } catch {
                invalid += 1
                print(
                    JSONWriter.compact(
                        .object([
                            ("line", .integer(Int64(number))),
                            ("id", RecordedCandidate.id(inLine: text).map { .string($0) } ?? .null),
                            ("error", .string(error.description)),
                        ])))
            }
        }
        if invalid > 0 { throw .failure("\(invalid) invalid line(s) in \(path)") }
    }

    static func explain(_ args: ParsedArguments) throws(CommandExit) {
        let text = args.positionals[0]
        var policy = AdmissionPolicy(config: try loadConfig(args.value("--config")))
        var now = wallClockNow()
        var historyLines = 0
        if let history = args.value("--history") {
            for (number, line) in try readLines(history) {
                let recorded: RecordedCandidate
                do {
                    recorded = try RecordedCandidate(line: line)
                } catch {
                    throw .failure("\(history):\(number): \(error)")
                }
                _ = policy.judge(recorded.candidate, now: recorded.receivedAt)
                now = recorded.receivedAt
                historyLines += 1
            }
        }
        let sender = args.value("--sender") ?? "explain-sender"
        let candidate = SpamCandidate(senderKey: sender, messageID: "explain", timestamp: now, content: .text(text), direction: .nostrToMesh)
        let (figures, fired) = policy.explain(candidate, now: now)
        let normalized = TextNormalizer.string(TextNormalizer.normalize(text))
        if args.has("--json") {
            printJSON(
                .object([
                    ("normalized", .string(normalized)), ("history_lines", .integer(Int64(historyLines))),
                    ("verdict", fired.first.map { .string($0.rawValue) } ?? .null),
                    ("fired", .array(fired.map { .string($0.rawValue) })), ("figures", figures.jsonValue),
                ]))
            return
        }
        print("normalised (\(figures.normalizedLength) scalars): \(normalized)")
        if historyLines > 0 { print("history: \(historyLines) messages judged first") }
        print("")
        print("  " + "rule".padding(toLength: 20) + "fires  figure")
        for rule in SpamRule.allCases {
            let applies = ruleApplies(rule, figures, policy.config)
            let figure = applies ? figures.summary(for: rule) : notApplicable(rule, figures, policy.config)
            print("  " + rule.rawValue.padding(toLength: 20) + (fired.contains(rule) ? "yes    " : "no     ") + figure)
        }
        print("")
        print(fired.first.map { "verdict: hidden by \($0.rawValue)" } ?? "verdict: accepted")
    }

    private static func ruleApplies(_ rule: SpamRule, _ f: SpamFigures, _ c: SpamFilterConfig) -> Bool {
        switch rule {
        case .linkRate: f.links > 0
        case .crossUserCopy: f.normalizedLength >= c.crossUserMinLength
        case .repeatedCharacters: f.normalizedLength >= c.repeatedCharactersMinLength
        default: true
        }
    }

    private static func notApplicable(_ rule: SpamRule, _ f: SpamFigures, _ c: SpamFilterConfig) -> String {
        switch rule {
        case .linkRate: "no links"
        case .crossUserCopy: "shorter than \(c.crossUserMinLength): rule does not apply"
        case .repeatedCharacters: "shorter than \(c.repeatedCharactersMinLength): rule does not apply"
        default: "-"
        }
    }
}

/// The wall clock, Unix seconds (the executable is the only place that reads it).
func wallClockNow() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
