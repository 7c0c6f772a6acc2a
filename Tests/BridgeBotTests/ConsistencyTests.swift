import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// Issue 15 defect 5: every subcommand has its own spec and help, `--` ends options, the top-level help
/// is readable, and `run` takes `--data-dir` as every other command does.
@Suite("bitchat-bridge command line: one spec per subcommand")
struct CommandLineConsistencyTests {
    /// Every command group and its subcommands, as the help must list them.
    static let groups: [(group: String, subcommands: [String])] = [
        ("nostr", ["listen", "post", "sign", "verify"]),
        ("identities", ["list", "allow", "unallow", "block", "unblock", "verify", "unverify", "note", "petname", "forget", "stats"]),
        ("relays", ["import"]),
        ("geohash", ["encode", "decode", "neighbors"]),
        ("bench", ["identities", "spam", "ingest", "reach"]),
        ("mesh", ["listen", "say", "deposit"]),
        ("wire", ["decode", "encode"]),
        ("spam", ["explain", "check"]),
        ("moderators", ["add", "list", "remove"]),
    ]

    @Test("the top-level help keeps a space between every command and its summary")
    func topLevelHelp() async throws {
        let help = try await runBridge(["--help"])
        #expect(help.status == 0)
        let lines = help.stdout.split(separator: "\n").map(String.init)
        for command in ["run", "identities", "radio-hub", "bench", "status"] {
            let line = try #require(lines.first { $0.hasPrefix("  \(command) ") }, "no line for \(command):\n\(help.stdout)")
            #expect(line.dropFirst(2 + command.count).hasPrefix("  "), "\(line)")
        }
        #expect(!help.stdout.contains("identitiesList"))
    }

    @Test("each group's help lists all its subcommands; each subcommand's help is its own", arguments: groups)
    func subcommandHelp(group: String, subcommands: [String]) async throws {
        let groupHelp = try await runBridge([group, "--help"])
        #expect(groupHelp.status == 0)
        for sub in subcommands {
            #expect(groupHelp.stdout.contains("bitchat-bridge \(group) \(sub)"), "\(group) --help lacks \(sub):\n\(groupHelp.stdout)")
            let help = try await runBridge([group, sub, "--help"])
            #expect(help.status == 0, "\(group) \(sub) --help: \(help.stderr)")
            #expect(help.stdout.contains("bitchat-bridge \(group) \(sub)"), "\(group) \(sub) --help:\n\(help.stdout)")
            for other in subcommands where other != sub {
                #expect(!help.stdout.contains("bitchat-bridge \(group) \(other) "), "\(group) \(sub) --help shows \(other)")
            }
            #expect(try await runBridge(["help", group, sub]).stdout == help.stdout)
        }
    }

    @Test(
        "an option another subcommand takes is refused (exit 64, named)",
        arguments: [
            ["nostr", "verify", "--cell"], ["nostr", "sign", "--geohash", "u4pruy", "--relay", "ws://127.0.0.1:1"],
            ["nostr", "post", "--geohash", "u4pruy", "--count", "3", "hi"], ["identities", "stats", "--limit", "3"],
            ["identities", "forget", "--json", "mesh:00"], ["geohash", "decode", "--bogus", "u4pruy"],
            ["bench", "spam", "--count", "3"], ["mesh", "say", "--say", "x", "--mesh", "tcp://127.0.0.1:1", "hi"],
            ["relays", "import", "--count", "3", "x.csv"], ["wire", "encode", "--signing-key", "00", "{}"],
        ])
    func foreignOption(arguments: [String]) async throws {
        let result = try await runBridge(arguments)
        let option = try #require(arguments.first { $0.hasPrefix("--") && !["--geohash", "--mesh"].contains($0) })
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        #expect(result.stderr.contains("unknown option '\(option)'"), "\(arguments): \(result.stderr)")
    }

    @Test("'--' ends options: spam explain takes a text that starts with '-'; without it the error says so")
    func endOfOptions() async throws {
        let explained = try await runBridge(["spam", "explain", "--json", "--", "-hello there"])
        #expect(explained.status == 0, "\(explained.stderr)")
        #expect(try JSONParser().parse(explained.stdout)["normalized"]?.stringValue?.contains("hello there") == true)
        let refused = try await runBridge(["spam", "explain", "-hello"])
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("unknown option '-hello'") && refused.stderr.contains("after '--'"), "\(refused.stderr)")
    }

    @Test("run --data-dir overrides BRIDGE_DATA_DIR and data_dir (shown with source 'option')")
    func runDataDirectory() async throws {
        let result = try await runBridge(
            ["run", "--data-dir", "/srv/bridge-data", "--print-config"],
            environment: ["BRIDGE_GEOHASH": "u4pruy", "BRIDGE_DATA_DIR": "/elsewhere"])
        #expect(result.status == 0, "\(result.stderr)")
        let config = try JSONParser().parse(result.stdout)
        #expect(config["data_dir"]?["value"] == .string("/srv/bridge-data"))
        #expect(config["data_dir"]?["source"] == .string("option"))
    }
}

/// Issue 15: a plain `swift test` without `.venv` must say, suite by suite, which interop and end-to-end
/// tests it skipped and how to run them — so every venv gate uses the trait that carries that reason.
@Suite("Venv-gated suites say why they were skipped")
struct VenvGateTests {
    @Test("the trait's comment names BRIDGE_TEST_VENV and how to run the suite")
    func traitComment() {
        let comments = TestEnvironment.needsVenv.comments.map(\.rawValue).joined()
        #expect(comments.contains("BRIDGE_TEST_VENV") && comments.contains("scripts/test"))
    }

    @Test("no test gates on the venv without that reason (a bare .enabled(if: …hasVenv) prints only 'skipped')")
    func everyGateUsesTheTrait() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        let files = try #require(FileManager.default.enumerator(atPath: tests.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }
        #expect(files.count > 20)
        let bare = "enabled(if: TestEnvironment." + "hasVenv"  // split, so this file does not match itself
        var gated = 0
        for file in files {
            let text = try String(contentsOfFile: tests.appendingPathComponent(file).path, encoding: .utf8)
            #expect(!text.contains(bare), "\(file) gates on the venv without a reason")
            gated += text.components(separatedBy: "TestEnvironment.needsVenv").count - 1
        }
        #expect(gated >= 15)
    }
}
