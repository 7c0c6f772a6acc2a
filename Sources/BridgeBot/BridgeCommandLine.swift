import BridgeApp
import BotSupport

#if canImport(Glibc)
import Glibc
#endif

/// The `bitchat-bridge` command tree and the single place errors become exit codes.
enum BridgeCommandLine {
    static let version = BridgeVersion.string

    /// Top-level commands: name, one-line summary, handler taking the remaining arguments.
    static let commands: [(name: String, summary: String, run: @Sendable ([String]) throws(CommandExit) -> Void)] = [
        ("run", "Run the bridge (configuration: --config FILE and BRIDGE_* environment variables).", RunCommand.run),
        ("demo", "Run the offline demo (relay, radio-hub, bridge, scripted phones on loopback).", DemoCommand.run),
        ("keys", "Create on first use, then show, the bridge's identity (peer ID, fingerprint, npubs).", KeysCommand.run),
        ("relays", "Choose the Nostr relays for a geohash, or import the relay directory CSV.", RelaysCommand.run),
        ("geohash", "Encode, decode and list neighbours of geohash cells.", GeohashCommand.run),
        ("nostr", "Listen to, post to, sign and verify Nostr geohash events.", NostrCommand.run),
        ("identities", "List and annotate the identities met (allow, block, verify, note, petname, forget, stats).", IdentitiesCommand.run),
        ("wire", "Decode a bitchat frame to JSON, or encode JSON to a frame (optionally signed).", WireCommand.run),
        ("mesh", "Join a bitchat mesh as a peer: listen (JSON lines), say a signed public message, or deposit.", MeshCommand.run),
        ("radio-hub", "Run a virtual radio segment over loopback TCP for mesh tests and demos.", RadioHubCommand.run),
        ("spam", "Explain the spam filter's verdict on a text, or judge a recorded stream (JSON lines).", SpamCommand.run),
        ("modlog", "Show or export the moderation log (messages the spam filter hid, with rule and figures).", ModlogCommand.run),
        ("console-token", "Create on first use, then show, the web console's sign-in token (mode 0600).", ConsoleTokenCommand.run),
        ("notice", "Post, list or withdraw operator notices through the running bridge (control socket).", NoticeCommand.run),
        ("status", "Show a running bridge's health and metrics from its loopback listener (exit 1 if unhealthy).", StatusCommand.run),
        ("bench", "Run a benchmark (figures and ratios against a reference, side by side).", BenchCommand.run),
    ]

    static var helpText: String {
        var lines = [
            "bitchat-bridge \(version): carries public chat between a geohash channel on Nostr and a bitchat BLE mesh.",
            "",
            "Usage: bitchat-bridge <command> [options]",
            "",
            "Commands:",
        ]
        let width = commands.map(\.name.count).max() ?? 0
        for command in commands { lines.append("  " + command.name.padding(toLength: width + 2) + command.summary) }
        lines += [
            "",
            "Global options:",
            "  --help       Show help (also: bitchat-bridge <command> --help).",
            "  --version    Print the version.",
            "",
            "Exit codes: 0 success, 64 usage error, 1 runtime failure.",
        ]
        return lines.joined(separator: "\n")
    }

    /// Runs one invocation and returns the process exit code.
    static func run(_ arguments: [String]) -> Int32 {
        do {
            try dispatch(arguments)
            return 0
        } catch {
            switch error {
            case .clean:
                return 0
            case .usage(let message):
                printError("error: \(message)")
                return 64
            case .failure(let message):
                printError("error: \(message)")
                return 1
            }
        }
    }

    private static func dispatch(_ arguments: [String]) throws(CommandExit) {
        guard let first = arguments.first else {
            print(helpText)
            throw .usage("no command given")
        }
        switch first {
        case "--help", "-h", "help":
            // `help nostr post` is `nostr post --help`.
            if arguments.count > 1, let command = commands.first(where: { $0.name == arguments[1] }) {
                try command.run(Array(arguments.dropFirst(2)) + ["--help"])
            }
            print(helpText)
            return
        case "--version", "version":
            print("bitchat-bridge \(version)")
            return
        default:
            guard let command = commands.first(where: { $0.name == first }) else {
                throw .usage("unknown command '\(first)' (see bitchat-bridge --help)")
            }
            try command.run(Array(arguments.dropFirst()))
        }
    }
}

/// Writes a line to stderr.
func printError(_ message: String) {
    let line = Array((message + "\n").utf8)
    line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
}

/// Prints a JSON value, indented for people unless `compact`.
func printJSON(_ value: JSONValue, compact: Bool = false) {
    print(compact ? JSONWriter.compact(value) : JSONWriter.pretty(value))
}
