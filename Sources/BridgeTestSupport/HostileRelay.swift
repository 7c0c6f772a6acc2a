import BotSupport
import Foundation

/// `tools/peers/hostile_relay.py`: a loopback "relay" that sends hand-made frames or misbehaves on purpose
/// (never upgrades, stays silent, closes at once, floods).
public enum HostileRelay {
    public enum Mode: String, Sendable { case frames, flood, neverUpgrade = "never-upgrade", silent, closeAtOnce = "close-at-once" }

    /// Writes `frames` (one JSON string per line, `{SUB}` = the client's subscription id) and starts the
    /// relay; TLS when `cert`/`key` are given. `flood`: `frames` go round and round until `count` are out
    /// at `rate` per second (0 = unpaced), then `then` once.
    public static func start(
        port: Int, mode: Mode = .frames, frames: [String], then: [String] = [], count: Int = 0, rate: Int = 0,
        directory: String, cert: String? = nil, key: String? = nil
    ) async throws -> ChildProcess {
        func write(_ frames: [String], _ name: String) throws -> String {
            let path = directory + "/\(name)-\(port).jsonl"
            let lines = frames.map { JSONWriter.compact(.string($0)) }.joined(separator: "\n") + "\n"
            try lines.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        var arguments = [Peers.fixtures + "/hostile_relay.py", "--port", "\(port)", "--mode", mode.rawValue,
                         "--frames", try write(frames, "frames")]
        if !then.isEmpty { arguments += ["--then", try write(then, "then")] }
        if mode == .flood { arguments += ["--count", "\(count)", "--rate", "\(rate)"] }
        if let cert, let key { arguments += ["--cert", cert, "--key", key] }
        let process = try ChildProcess(TestEnvironment.venvBinary("python"), arguments, name: "hostile-relay-\(mode.rawValue)")
        try await process.waitForLine("hostile relay READY") { $0.hasPrefix("READY ") }
        return process
    }

    /// How many lines the relay printed starting with `word` (`CONNECT`, `UPGRADED`, `GONE`, `FLOODED`).
    public static func count(_ word: String, in relay: ChildProcess) -> Int {
        relay.stdoutLines.filter { $0.hasPrefix(word + " ") }.count
    }
}
