import BotSupport
public import Identity

extension OperatorLists {
    /// Reads `path`: a missing file is the empty policy; anything else that fails throws (fail-closed).
    public static func load(path: String) throws(LoadError) -> OperatorLists {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.read(path, maxBytes: Limits.maxFileBytes)
        } catch {
            if error.isNotFound { return .empty }
            throw .unreadable(error.description)
        }
        do {
            return try OperatorLists(json: bytes)
        } catch {
            throw .malformed(error)
        }
    }
}
