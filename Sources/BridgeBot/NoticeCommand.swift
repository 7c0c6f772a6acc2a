import BridgeApp
import BitchatWire
import BotSupport
import Bridge

#if canImport(Glibc)
import Glibc
import BridgeCore
#endif

/// `bitchat-bridge notice`: post, list and withdraw operator notices through a running bridge's control socket.
enum NoticeCommand {
    static let dataDirOption = OptionSpec.value(
        "--data-dir", "DIR", "Data directory of the running bridge (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge).")

    static let postSpec = CommandSpec(
        path: "notice",
        summary: "Post an operator notice on the board (mesh and Nostr) through the running bridge.",
        positionals: [.text("TEXT")],
        options: [
            .flag("--urgent", "Mark it urgent (the board's urgent flag; t=urgent on Nostr)."),
            .value("--expires", "DURATION", "Lifetime: <n>m, <n>h or <n>d, at most 7 days (default 12h)."),
            .value("--geohash", "GH", "Board cell (default: the bridge's channel geohash)."),
            dataDirOption,
        ],
        details: "Prints the notice's id. Exit 1 when no bridge is running (no control socket) or the bridge refuses it.")

    static let listSpec = CommandSpec(
        path: "notice list",
        summary: "List this bridge's live operator notices.",
        options: [.flag("--json", "One JSON object per notice, one per line."), dataDirOption])

    static let withdrawSpec = CommandSpec(
        path: "notice withdraw",
        summary: "Withdraw an operator notice: a board tombstone on the mesh and a kind 5 on Nostr.",
        positionals: [PositionalSpec(name: "ID")],
        options: [dataDirOption])

    static let group = CommandGroup(
        name: "notice",
        summary: "Post, list or withdraw operator notices through the running bridge's control socket.",
        subcommands: [Subcommand("list", listSpec, run: list), Subcommand("withdraw", withdrawSpec, run: withdraw)],
        fallback: Subcommand("post", postSpec, run: post))

    static func post(_ args: ParsedArguments) throws(CommandExit) {
        let positionals = args.positionals
        var request: [(String, JSONValue)] = [("op", .string("notice.post")), ("text", .string(positionals[0]))]
        request.append(("urgent", .bool(args.has("--urgent"))))
        if let expires = args.value("--expires") {
            do throws(NoticeError) { _ = try OperatorNotice.parseDuration(expires) } catch { throw .usage("--expires: \(error)") }
            request.append(("expires", .string(expires)))
        }
        if let geohash = args.value("--geohash") { request.append(("geohash", .string(geohash))) }
        let answer = try ControlSocket.call(.object(request), args)
        print(answer["notice"]?["id"]?.stringValue ?? "")
    }

    static func list(_ args: ParsedArguments) throws(CommandExit) {
        let answer = try ControlSocket.call(.object([("op", .string("notice.list"))]), args)
        guard case .array(let notices)? = answer["notices"] else { throw .failure("the bridge's answer has no notices") }
        for notice in notices {
            if args.has("--json") {
                emitLine(notice)
            } else {
                let urgent = notice["urgent"]?.boolValue == true ? " [urgent]" : ""
                print("\(notice["id"]?.stringValue ?? "")  \(notice["geohash"]?.stringValue ?? "")\(urgent)  \(notice["text"]?.stringValue ?? "")")
            }
        }
        if notices.isEmpty, !args.has("--json") { printError("no live notices") }
    }

    static func withdraw(_ args: ParsedArguments) throws(CommandExit) {
        let positionals = args.positionals
        guard (try? Hex.decode(positionals[0])) != nil else { throw .usage("ID '\(positionals[0])' is not hex") }
        _ = try ControlSocket.call(.object([("op", .string("notice.withdraw")), ("id", .string(positionals[0]))]), args)
        print("withdrawn \(positionals[0])")
    }
}
