import BridgeApp
import BotSupport
import Console

/// `bitchat-bridge console-token`: makes the console token on first use (mode 0600 in the data directory), then
/// shows it. The one place the token is printed; it never goes to the log or a page.
enum ConsoleTokenCommand {
    static let spec = CommandSpec(
        path: "console-token",
        summary: "Create on first use, then show, the token that signs in to the web console (mode 0600 in the data directory).",
        options: [
            .flag("--rotate", "Replace the token with a new one (sessions signed in with the old one end at once)."),
            .flag("--path", "Print the token file's path instead of the token."),
            .value("--data-dir", "DIR", "Data directory (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge)."),
        ],
        details: """
            Actions in the console (block, unblock, allow, note, settings) need this token, and a listener beyond
            loopback (http_listen 0.0.0.0:PORT) is refused at start without it. A running bridge follows the file: a
            token made or rotated while it runs works at once (a rotation ends the sessions signed in with the old one).
            """)

    static func run(_ args: ParsedArguments) throws(CommandExit) {
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
        // Say which bridge the token reaches: a token in a directory no bridge uses signs in nowhere.
        if let pid = ControlSocket.runningBridge(dataDirectory: dataDirectory) {
            printError("console-token: the bridge running on \(dataDirectory) (PID \(pid)) uses it at once")
        } else {
            printError("console-token: no bridge is running on the data directory \(dataDirectory); the token works once "
                + "one starts there (bitchat-bridge run --data-dir \(dataDirectory))")
        }
        print(args.has("--path") ? path : result.token)
    }
}
