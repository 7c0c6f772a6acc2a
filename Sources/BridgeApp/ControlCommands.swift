import BitchatWire
import BotSupport
import Bridge
import BridgeCore
import MeshSync

#if canImport(Glibc)
import Glibc
#endif

/// The control socket's requests (``ControlSocket``): `notice.post`, `notice.list`, `notice.withdraw`,
/// `stores.changed` (another process wrote the stores: the CLI's `identities` edits), `modlog.release` (a hidden
/// message released, either way), and `ping` (which bridge runs on the data directory: its PID, its name and where
/// its status listener is — `status --data-dir`). Every
/// answer is `{"ok":true,…}` or `{"ok":false,"error":…}`; every request is logged at info (op, id, urgency,
/// lengths — the text itself is the operator's and goes to the mesh anyway, but logs stay short).
enum ControlCommands {
    /// Which bridge answers (`ping`): its name (``BridgeRuntime/name(_:)``) and where its status listener is.
    struct Bridge: Sendable {
        let name: String
        let httpListen: String?
    }

    static func answer(_ request: JSONValue, coordinator: BridgeCoordinator, bridge: Bridge, logger: Logger) async -> JSONValue {
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
        case "modlog.release":
            guard let id = request["id"]?.stringValue, !id.isEmpty else { return reply(op, logger, error: "modlog.release needs an id") }
            switch await coordinator.release(messageID: id, by: request["by"]?.stringValue ?? "cli") {
            case .success:
                logger.info("control request", [("op", .string(op)), ("id", .string(id))])
                return .object([("ok", .bool(true)), ("id", .string(id))])
            case .failure(let error):
                return reply(op, logger, error: error.description)
            }
        case "ping":
            return .object([
                ("ok", .bool(true)), ("pid", .integer(Int64(getpid()))), ("name", .string(bridge.name)),
                ("http_listen", bridge.httpListen.map(JSONValue.string) ?? .null),
            ])
        case "stores.changed":
            // Another process (`identities block`, `forget`) wrote the database: the block list and pins are read again.
            coordinator.storesChanged()
            if let site = request["site"] {
                guard let text = site["target"]?.stringValue, let on = site["on"]?.boolValue, let by = site["by"]?.stringValue,
                    let target = try? SiteTarget(parsing: text)
                else { return reply(op, logger, error: "stores.changed: site needs a target (block:… or staff:…), on and by") }
                coordinator.submit(OperatorInput.site(target, on: on, by: by))
            }
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
            return reply(op, logger, error: "unknown op \"\(op)\" (notice.post, notice.list, notice.withdraw, stores.changed, modlog.release, ping)")
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
