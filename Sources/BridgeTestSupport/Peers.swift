import Foundation

/// Real relay processes on 127.0.0.1, started and stopped by each test (launchers in `tools/peers/`).
public enum Peers {
    /// `tools/peers/` of this repository: the relay launchers and reference-peer drivers.
    public static var fixtures: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("tools/peers").path
    }

    public enum Kind: Sendable { case sdk, nostrRelay, monstr }

    /// `tls`: (certificate, key) PEM paths; nostr-relay then serves wss:// (uvicorn's ssl options).
    /// `host`: the loopback address to listen on, `127.0.0.1` or `::1` (the sdk relay binds either).
    public static func start(_ kind: Kind, port: Int, directory: String, arguments extra: [String] = [],
                      tls: (cert: String, key: String)? = nil, host: String = "127.0.0.1") async throws -> ChildProcess {
        precondition(host == "127.0.0.1" || kind == .sdk, "only the sdk relay takes another listen address")
        let process: ChildProcess
        switch kind {
        case .sdk:
            process = try ChildProcess(
                TestEnvironment.venvBinary("python"), [fixtures + "/sdk_relay.py", "--addr", host, "--port", "\(port)"] + extra,
                name: "sdk-relay")
        case .monstr:
            process = try ChildProcess(TestEnvironment.venvBinary("python"), [fixtures + "/monstr_relay.py", "--port", "\(port)", "--no-store"], name: "monstr")
        case .nostrRelay:
            let template = try String(contentsOfFile: fixtures + "/nostr-relay.yaml.in", encoding: .utf8)
            let config = template.replacingOccurrences(of: "@DB_PATH@", with: directory + "/relay.sqlite3")
                .replacingOccurrences(of: "17011", with: "\(port)")
                .replacingOccurrences(of: "  loglevel: info\n",
                                      with: "  loglevel: info\n" + (tls.map { "  ssl_certfile: \($0.cert)\n  ssl_keyfile: \($0.key)\n" } ?? ""))
            let path = directory + "/nostr-relay-\(port).yaml"
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            process = try ChildProcess(TestEnvironment.venvBinary("nostr-relay"), ["-c", path, "serve", "--use-uvicorn"], name: "nostr-relay")
        }
        try await waitForPort(port, process: process, host: host)
        return process
    }

    /// Waits until `host:port` (`127.0.0.1` or `::1`) accepts a TCP connection.
    public static func waitForPort(_ port: Int, process: ChildProcess, host: String = "127.0.0.1") async throws {
        let deadline = ContinuousClock.now + .seconds(90)
        var expired = false
        // One more attempt after the deadline: a starved waiter must not miss a port that opened meanwhile.
        while !expired {
            expired = ContinuousClock.now >= deadline
            if canConnect(host: host, port: port) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        struct PortTimeout: Error, CustomStringConvertible { let description: String }
        throw PortTimeout(description: "port \(port) never opened (\(process.name) \(process.isRunning ? "still running" : "exited")):\n\(process.transcript)")
    }

    private static func canConnect(host: String, port: Int) -> Bool {
        if host.contains(":") {
            let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else { return false }
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            } == 0
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
