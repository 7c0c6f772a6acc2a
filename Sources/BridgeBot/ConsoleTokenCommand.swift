import BridgeApp
import BotSupport
import Console

/// `bitchat-bridge console-token`: makes the console token on first use (mode 0600 in the data directory), then
/// shows it. The one place the token is printed; it never goes to the log or a page.
enum ConsoleTokenCommand {
    static let spec = CommandSpec(
        path: "console-token",
        summary: "Create on first use, then show, the token that signs in to the web console (mode 0600 in the data directory).",
        usage: ["[--rotate] [--path] [--data-dir DIR]"],
        options: [
            .flag("--rotate", "Replace the token with a new one (sessions signed in with the old one end at the bridge's restart)."),
            .flag("--path", "Print the token file's path instead of the token."),
            .value("--data-dir", "DIR", "Data directory (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge)."),
        ],
        details: """
            Actions in the console (block, unblock, allow, note, settings) need this token, and a listener beyond
            loopback (http_listen 0.0.0.0:PORT) is refused at start without it. A running bridge reads the token at start.
            """)

    static func run(_ arguments: [String]) throws(CommandExit) {
        let args = try ParsedArguments.parse(arguments, spec: spec)
        _ = try args.requirePositionals([])
        let dataDirectory = Paths.dataDirectory(option: args.value("--data-dir"))
        try KeysCommand.checkDataDirectory(dataDirectory)
        let result: (token: String, created: Bool)
        do {
            result = try ConsoleToken.loadOrCreate(dataDirectory: dataDirectory, rotate: args.has("--rotate"))
        } catch {
            throw .failure(error.description)
        }
        let path = ConsoleToken.path(dataDirectory: dataDirectory)
        if result.created { printError("console-token: wrote \(path) (mode 0600)") }
        print(args.has("--path") ? path : result.token)
    }
}
