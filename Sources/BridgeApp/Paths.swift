import BotSupport

#if canImport(Glibc)
import Glibc
#endif

/// Where the bridge keeps and finds its files.
public enum Paths {
    /// The data directory: `--data-dir`, else `$BRIDGE_DATA_DIR` (Docker sets `/data`), else
    /// `$XDG_DATA_HOME/bitchat-bridge`, else `~/.local/share/bitchat-bridge`.
    public static func dataDirectory(option: String?) -> String {
        if let option, !option.isEmpty { return option }
        if let env = ProcessEnvironment.value("BRIDGE_DATA_DIR"), !env.isEmpty { return env }
        if let xdg = ProcessEnvironment.value("XDG_DATA_HOME"), !xdg.isEmpty { return xdg + "/bitchat-bridge" }
        if let home = ProcessEnvironment.value("HOME"), !home.isEmpty { return home + "/.local/share/bitchat-bridge" }
        return "./bitchat-bridge-data"
    }

    /// Candidate locations of `relays.json`, in the order they are tried: `--directory`, `$BRIDGE_RELAY_FILE`,
    /// `./relays.json`, next to the executable, `<prefix>/share/bitchat-bridge/`, `/usr/share/bitchat-bridge/`.
    public static func relayDirectoryCandidates(option: String?) -> [String] {
        if let option { return [option] }
        if let env = ProcessEnvironment.value("BRIDGE_RELAY_FILE"), !env.isEmpty { return [env] }
        var candidates = ["relays.json"]
        if let executable = executablePath() {
            let directory = FileIO.directoryName(of: executable)
            candidates.append(FileIO.join(directory, "relays.json"))
            candidates.append(FileIO.join(FileIO.directoryName(of: directory), "share/bitchat-bridge/relays.json"))
        }
        candidates.append("/usr/share/bitchat-bridge/relays.json")
        return candidates
    }

    public static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
