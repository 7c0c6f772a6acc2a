import BotSupport
public import Bridge
import BridgeCore
public import RelayDirectory

/// What `run` and the CLI read from the data directory and the configuration, with the errors every command
/// reports the same way (exit 64 for what the operator fixes, 1 for damaged data).
public enum DataFiles {
    /// The key file, created on first use; a file written before the check values existed is upgraded (`note`
    /// says so).
    public static func loadKeys(_ store: KeyStore, note: (String) -> Void) throws(CommandExit) -> KeyStore.Loaded {
        let loaded: KeyStore.Loaded
        do {
            loaded = try store.loadOrCreate()
        } catch {
            throw error.isPermissionProblem ? .usage(error.description) : .failure(error.description)
        }
        if !loaded.addedCheckValues.isEmpty {
            note("key file \(store.path) upgraded: added \(loaded.addedCheckValues.joined(separator: ", ")) (same identity)")
        }
        return loaded
    }

    /// For commands that use the data directory without the key file (identities, modlog): the same
    /// permission rule as ``KeyStore/checkDirectory(_:)``, exit 64.
    public static func checkDataDirectory(_ path: String) throws(CommandExit) {
        do {
            try KeyStore.checkDirectory(path)
        } catch {
            throw error.isPermissionProblem ? .usage(error.description) : .failure(error.description)
        }
    }

    /// The relay directory (`relays.json`): `option`, else the first of ``Paths/relayDirectoryCandidates(option:)``
    /// that exists. `setting` names what the operator sets to choose another (`relay_file` for `run`).
    public static func loadRelayDirectory(option: String?, setting: String) throws(CommandExit) -> (RelayDirectory, String) {
        let candidates = Paths.relayDirectoryCandidates(option: option)
        for path in candidates {
            let bytes: [UInt8]
            do {
                bytes = try FileIO.read(path, maxBytes: 8 << 20)
            } catch {
                if error.isNotFound && option == nil { continue }
                throw .failure("cannot read relay directory: \(error)")
            }
            do {
                return (try RelayDirectory(json: String(decoding: bytes, as: UTF8.self)), path)
            } catch {
                throw .failure("\(path): \(error)")
            }
        }
        throw .failure("no relay directory found (tried \(candidates.joined(separator: ", "))); set \(setting)")
    }

    /// The configuration: the file at `path` (if any) under the `BRIDGE_*` environment.
    public static func loadConfiguration(path: String?) throws(CommandExit) -> BridgeConfiguration {
        var text: String?
        if let path {
            do {
                text = String(decoding: try FileIO.read(path, maxBytes: BridgeConfiguration.Limits.maxFileBytes), as: UTF8.self)
            } catch {
                throw .usage("configuration file \(path): \(error)")
            }
        }
        do {
            return try BridgeConfiguration.resolve(
                fileText: text, filePath: path ?? "config", environment: ProcessEnvironment.variables(withPrefix: "BRIDGE_"))
        } catch {
            throw .usage(error.description)
        }
    }
}
