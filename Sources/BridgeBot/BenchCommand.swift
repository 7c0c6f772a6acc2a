import BridgeApp
import BotSupport

/// `bitchat-bridge bench <name> [--json]`: benchmarks that measure the real code against a reference
/// side by side in one process and print figures and ratios (format: shared/spec/BENCH.md).
enum BenchCommand {
    /// Every benchmark: name, one-line summary, and the function producing its report.
    /// Options only some benchmarks have, by benchmark name.
    static let ownOptions: [String: [OptionSpec]] = [
        "flood": [.flag("--million-only", "Only the 1,000,000-frame mixed case (what scripts/check-flood checks).")],
    ]

    static let benches: [(name: String, summary: String, run: @Sendable (BenchOptions) throws(CommandExit) -> BenchReport)] = [
        ("identities", "stranger cache: row store vs the one-blob design at C = 2,000 / 10,000 / 100,000", IdentitiesBench.run),
        ("spam", "spam filter vs exhaustive reference: ordinary, flood, junk corpora; memory under a 100k-sender flood", SpamBench.run),
        ("ingest", "relay frame → parse → verify → judge → carrier, vs the bare Schnorr verify loop", IngestBench.run),
        ("sync", "REQUEST_SYNC answer from 1,000 messages + 200 board posts vs a linear scan; airtime of a full answer vs the budget", SyncBench.run),
        ("flood", "1M hostile frames through WebSocket runtime → relay pool; verification on every core vs one", FloodBench.run),
        ("courier", "courier gateway: drops matched against 5,000 watched peers vs a linear scan; memory with 5,000 envelopes pending", CourierBench.run),
        ("reach", "a busy site: 600 posts, 300 senders, 3 levels through the router's scheduler vs FIFO, seen by model phones", ReachBench.run),
    ]

    /// `bench NAME`: one subcommand per benchmark, each with its own help.
    static var group: CommandGroup {
        CommandGroup(
            name: "bench",
            summary: "Run a benchmark and print its figures and ratios.",
            subcommands: benches.map { bench in
                Subcommand(bench.name, CommandSpec(
                    path: "bench \(bench.name)", summary: "Benchmark: \(bench.summary).",
                    options: [
                        .flag("--json", "Print exactly one JSON object (shared/spec/BENCH.md)."),
                        .flag("--quick", "Smaller inputs, for a smoke run in tests."),
                    ] + (ownOptions[bench.name] ?? []))) { args throws(CommandExit) in
                        let report = try bench.run(BenchOptions(quick: args.has("--quick"), millionOnly: args.has("--million-only")))
                        print(args.has("--json") ? JSONWriter.compact(report.jsonValue) : report.table)
                    }
            })
    }

}

/// Options every benchmark understands.
struct BenchOptions: Sendable {
    /// Smaller inputs so a test can run the benchmark end to end in seconds.
    var quick: Bool
    /// `bench flood --million-only`: skip the per-kind cases and the verification spread.
    var millionOnly = false
}

/// A benchmark's result: cases, each with named metrics whose names carry the unit (`_us`, `_ms`, …).
struct BenchReport {
    var bench: String
    var cases: [(name: String, metrics: [(String, Double)])] = []
    /// Free-form lines printed under the table (targets met, notes).
    var notes: [String] = []

    init(bench: String) { self.bench = bench }

    mutating func add(_ name: String, _ metrics: [(String, Double)]) { cases.append((name, metrics)) }

    var jsonValue: JSONValue {
        .object([
            ("bench", .string(bench)),
            ("version", .string(BridgeCommandLine.version)),
            (
                "cases",
                .object(
                    cases.map { c in
                        (c.name, .object(c.metrics.map { ($0.0, metricValue($0.1)) }))
                    })
            ),
        ])
    }

    var table: String {
        var lines = ["bench \(bench) (bitchat-bridge \(BridgeCommandLine.version))"]
        for c in cases {
            lines.append("  \(c.name)")
            for (metric, value) in c.metrics {
                lines.append("    " + metric.padding(toLength: 30) + " " + formatted(value))
            }
        }
        lines += notes.map { "  " + $0 }
        return lines.joined(separator: "\n")
    }

    private func metricValue(_ value: Double) -> JSONValue {
        value == value.rounded() && abs(value) < 1e15 ? .integer(Int64(value)) : .double((value * 1000).rounded() / 1000)
    }

    private func formatted(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\((value * 100).rounded() / 100)"
    }
}
