import BridgeApp
import BotSupport

#if canImport(Glibc)
import Glibc
#endif

/// The `bitchat-bridge` command tree and the single place errors become exit codes.
enum BridgeCommandLine {
    static let version = BridgeVersion.string

    /// A top-level command: one spec, parsed and then run, or a group of subcommands.
    enum Node: Sendable {
        case single(Subcommand)
        case group(CommandGroup)
    }

    /// Top-level commands: name, one-line summary, and what parses and runs the remaining arguments.
    static let commands: [(name: String, summary: String, node: Node)] = [
        ("run", "Run the bridge (configuration: --config FILE and BRIDGE_* environment variables).",
         .single(Subcommand("run", RunCommand.spec, run: RunCommand.run))),
        ("demo", "Run the offline demo (relay, radio-hub, bridge, scripted phones on loopback).",
         .single(Subcommand("demo", DemoCommand.spec, run: DemoCommand.run))),
        ("keys", "Create on first use, then show, the bridge's identity (peer ID, fingerprint, npubs).",
         .single(Subcommand("keys", KeysCommand.spec, run: KeysCommand.run))),
        ("relays", "Choose the Nostr relays for a geohash, or import the relay directory CSV.", .group(RelaysCommand.group)),
        ("geohash", "Encode, decode and list neighbours of geohash cells.", .group(GeohashCommand.group)),
        ("nostr", "Listen to, post to, sign and verify Nostr geohash events.", .group(NostrCommand.group)),
        ("identities", "List and annotate the identities met (allow, block, verify, note, petname, forget, stats).",
         .group(IdentitiesCommand.group)),
        ("wire", "Decode a bitchat frame to JSON, or encode JSON to a frame (optionally signed).", .group(WireCommand.group)),
        ("mesh", "Join a bitchat mesh as a peer: listen (JSON lines), say a signed public message, or deposit.", .group(MeshCommand.group)),
        ("radio-hub", "Run a virtual radio segment over loopback TCP for mesh tests and demos.",
         .single(Subcommand("radio-hub", RadioHubCommand.spec, run: RadioHubCommand.run))),
        ("spam", "Explain the spam filter's verdict on a text, or judge a recorded stream (JSON lines).", .group(SpamCommand.group)),
        ("modlog", "Show, export or release from the moderation log (messages the spam filter hid, with rule and figures).", .group(ModlogCommand.group)),
        ("console-token", "Create on first use, then show, the web console's sign-in token (mode 0600).",
         .single(Subcommand("console-token", ConsoleTokenCommand.spec, run: ConsoleTokenCommand.run))),
        ("moderators", "Give each moderator a console token of their own (add NAME, list, remove NAME).", .group(ModeratorsCommand.group)),
        ("notice", "Post, list or withdraw operator notices through the running bridge (control socket).", .group(NoticeCommand.group)),
        ("doctor", "Check this host before the gates open: data directory, Bluetooth, BlueZ settings, relays, clock.",
         .single(Subcommand("doctor", DoctorCommand.spec, run: DoctorCommand.run))),
        ("status", "Show a running bridge's health and metrics from its loopback listener (exit 1 if unhealthy).",
         .single(Subcommand("status", StatusCommand.spec, run: StatusCommand.run))),
        ("bench", "Run a benchmark (figures and ratios against a reference, side by side).", .group(BenchCommand.group)),
    ]

    /// The (sub)command `arguments` name and its arguments, parsed against its spec (`--help` prints and throws
    /// ``CommandExit/clean``); what ``run(_:)`` runs, and what the help-forms test parses.
    static func resolve(_ arguments: [String]) throws(CommandExit) -> (Subcommand, ParsedArguments) {
        guard let first = arguments.first, let command = commands.first(where: { $0.name == first }) else {
            throw .usage("unknown command '\(arguments.first ?? "")' (see bitchat-bridge --help)")
        }
        switch command.node {
        case .single(let sub): return (sub, try ParsedArguments.parse(Array(arguments.dropFirst()), spec: sub.spec))
        case .group(let group): return try group.resolve(Array(arguments.dropFirst()))
        }
    }

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
            if arguments.count > 1, commands.contains(where: { $0.name == arguments[1] }) {
                _ = try resolve(Array(arguments.dropFirst()) + ["--help"])
            }
            print(helpText)
            return
        case "--version", "version":
            print("bitchat-bridge \(version)")
            return
        default:
            let (sub, args) = try resolve(arguments)
            try sub.run(args)
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
