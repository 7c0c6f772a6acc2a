import BridgeApp
import BotSupport

extension ControlSocket {
    /// One request to the bridge running on the data directory the arguments name (`--data-dir`, else the default),
    /// as `notice` and `modlog release` send it; no bridge, or an `ok:false` answer, becomes exit 1 with its error.
    static func call(_ request: JSONValue, _ args: ParsedArguments) throws(CommandExit) -> JSONValue {
        do {
            return try ControlSocket.request(request, dataDirectory: Paths.dataDirectory(option: args.value("--data-dir")))
        } catch {
            throw .failure(error.description)
        }
    }
}
