import BitchatWire
import BotSupport
import Bridge

#if canImport(Glibc)
import Glibc
import BridgeCore
#endif

/// The control socket's requests (``ControlSocket``): `notice.post`, `notice.list`, `notice.withdraw`. Every
/// answer is `{"ok":true,…}` or `{"ok":false,"error":…}`; every request is logged at info (op, id, urgency,
/// lengths — the text itself is the operator's and goes to the mesh anyway, but logs stay short).
enum ControlCommands {
    static func answer(_ request: JSONValue, coordinator: BridgeCoordinator, logger: Logger) async -> JSONValue {
        let op = request["op"]?.stringValue ?? ""
        switch op {
        case "notice.post":
            guard let text = request["text"]?.stringValue else { return reply(op, logger, error: "notice.post needs a text") }
            let urgent = request["urgent"]?.boolValue ?? false
            var lifetime = OperatorNotice.Defaults.lifetimeMs
            if let expires = request["expires"]?.stringValue {
                do throws(NoticeError) { lifetime = try OperatorNotice.parseDuration(expires) } catch {
                    return reply(op, logger, error: error.description)
                }
            }
            let geohash = request["geohash"]?.stringValue
            switch await coordinator.postNotice(text, urgent: urgent, lifetimeMs: lifetime, geohash: geohash) {
            case .success(let post):
                logger.info("control request", [
                    ("op", .string(op)), ("id", .string(Hex.encode(post.postID))), ("urgent", .bool(urgent)),
                    ("text.bytes", .integer(Int64(text.utf8.count))), ("lifetime.ms", .integer(Int64(lifetime))),
                ])
                return .object([("ok", .bool(true)), ("notice", json(post))])
            case .failure(let error):
                return reply(op, logger, error: error.description)
            }
        case "stores.changed":
            // Another process (`identities block`, `forget`) wrote the database: the block list and pins are read again.
            coordinator.storesChanged()
            logger.info("control request", [("op", .string(op))])
            return .object([("ok", .bool(true))])
        case "notice.list":
            let posts = await coordinator.notices()
            logger.info("control request", [("op", .string(op)), ("count", .integer(Int64(posts.count)))])
            return .object([("ok", .bool(true)), ("notices", .array(posts.map(json)))])
        case "notice.withdraw":
            guard let id = request["id"]?.stringValue, let bytes = try? Hex.decode(id) else {
                return reply(op, logger, error: "notice.withdraw needs an id (hex)")
            }
            switch await coordinator.withdrawNotice(postID: bytes) {
            case .success:
                logger.info("control request", [("op", .string(op)), ("id", .string(id))])
                return .object([("ok", .bool(true)), ("id", .string(id))])
            case .failure(let error):
                return reply(op, logger, error: error.description)
            }
        default:
            return reply(op, logger, error: "unknown op \"\(op)\" (notice.post, notice.list, notice.withdraw, stores.changed)")
        }
    }

    private static func reply(_ op: String, _ logger: Logger, error: String) -> JSONValue {
        logger.info("control request", [("op", .string(op)), ("error", .string(error))])
        return ControlSocket.failure(error)
    }

    static func json(_ post: BoardPost) -> JSONValue {
        .object([
            ("id", .string(Hex.encode(post.postID))), ("text", .string(post.content)), ("geohash", .string(post.geohash)),
            ("urgent", .bool(post.flags & BoardPost.urgentFlag != 0)), ("created_ms", .integer(Int64(post.createdAt))),
            ("expires_ms", .integer(Int64(post.expiresAt))),
        ])
    }
}

/// `bitchat-bridge notice`: post, list and withdraw operator notices through a running bridge's control socket.
enum NoticeCommand {
    static let dataDirOption = OptionSpec.value(
        "--data-dir", "DIR", "Data directory of the running bridge (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge).")

    static let postSpec = CommandSpec(
        path: "notice",
        summary: "Post an operator notice on the board (mesh and Nostr) through the running bridge.",
        usage: ["TEXT [--urgent] [--expires DURATION] [--geohash GH] [--data-dir DIR]"],
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
        usage: ["[--json] [--data-dir DIR]"],
        options: [.flag("--json", "One JSON object per notice, one per line."), dataDirOption])

    static let withdrawSpec = CommandSpec(
        path: "notice withdraw",
        summary: "Withdraw an operator notice: a board tombstone on the mesh and a kind 5 on Nostr.",
        usage: ["ID [--data-dir DIR]"],
        options: [dataDirOption])

    static let group = CommandGroup(
        name: "notice",
        summary: "Post, list or withdraw operator notices through the running bridge's control socket.",
        subcommands: [Subcommand("list", listSpec, run: list), Subcommand("withdraw", withdrawSpec, run: withdraw)],
        fallback: Subcommand("post", postSpec, run: post))

    static func run(_ arguments: [String]) throws(CommandExit) {
        try group.run(arguments)
    }

    static func post(_ args: ParsedArguments) throws(CommandExit) {
        let positionals = try args.requirePositionals(["TEXT"])
        var request: [(String, JSONValue)] = [("op", .string("notice.post")), ("text", .string(positionals[0]))]
        request.append(("urgent", .bool(args.has("--urgent"))))
        if let expires = args.value("--expires") {
            do throws(NoticeError) { _ = try OperatorNotice.parseDuration(expires) } catch { throw .usage("--expires: \(error)") }
            request.append(("expires", .string(expires)))
        }
        if let geohash = args.value("--geohash") { request.append(("geohash", .string(geohash))) }
        let answer = try call(.object(request), args)
        print(answer["notice"]?["id"]?.stringValue ?? "")
    }

    static func list(_ args: ParsedArguments) throws(CommandExit) {
        _ = try args.requirePositionals([])
        let answer = try call(.object([("op", .string("notice.list"))]), args)
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
        let positionals = try args.requirePositionals(["ID"])
        guard (try? Hex.decode(positionals[0])) != nil else { throw .usage("ID '\(positionals[0])' is not hex") }
        _ = try call(.object([("op", .string("notice.withdraw")), ("id", .string(positionals[0]))]), args)
        print("withdrawn \(positionals[0])")
    }

    /// One request over `<data-dir>/control.sock`; an `ok:false` answer becomes exit 1 with its error.
    static func call(_ request: JSONValue, _ args: ParsedArguments) throws(CommandExit) -> JSONValue {
        do {
            return try ControlSocket.request(request, dataDirectory: Paths.dataDirectory(option: args.value("--data-dir")))
        } catch {
            throw .failure(error.description)
        }
    }
}
