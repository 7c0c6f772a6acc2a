import Foundation

/// Where test-only tools live. Set by `scripts/test`; suites that need them gate on ``hasVenv``.
public enum TestEnvironment {
    /// `$BRIDGE_TEST_VENV`: the checkout's `.venv` with the Python reference peers.
    public static var venv: String? { ProcessInfo.processInfo.environment["BRIDGE_TEST_VENV"] }

    public static var hasVenv: Bool { venv != nil }

    /// `<venv>/bin/<name>` (python, nostr-relay, …).
    public static func venvBinary(_ name: String) -> String {
        (venv ?? ".venv") + "/bin/" + name
    }

    /// The `bitchat-bridge` executable built next to the test bundle (`swift build --build-tests` builds it).
    public static var bridgeExecutable: String {
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = testBinary.deletingLastPathComponent()
        // On Linux the test binary is `<build>/debug/<Package>PackageTests.xctest`; the executable is beside it.
        while !directory.path.isEmpty, directory.path != "/" {
            let candidate = directory.appendingPathComponent("bitchat-bridge").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return ".build/debug/bitchat-bridge"
    }

    /// A fresh private temporary directory (removed by the caller or left in /tmp for post-mortems).
    public static func temporaryDirectory(_ prefix: String = "bridge-test") -> String {
        let path = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it; we release it at once).
public enum LoopbackPort {
    public static func free() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        precondition(fd >= 0, "socket() failed")
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        precondition(bound == 0, "bind() failed")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
