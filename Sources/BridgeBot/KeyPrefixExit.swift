import BridgeApp
import Identity

extension CommandExit {
    /// A typed key that names no single key: the operator types it again (exit 64), unless the stores could not be read.
    init(_ error: KeyPrefixError) {
        if case .lookupFailed = error {
            self = .failure(error.description)
        } else {
            self = .usage(error.description)
        }
    }
}
