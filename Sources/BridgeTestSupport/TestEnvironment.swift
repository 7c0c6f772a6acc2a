import Foundation
public import Testing

/// Where test-only tools live. Set by `scripts/test`; suites that need them gate on ``needsVenv``.
public enum TestEnvironment {
    /// `$BRIDGE_TEST_VENV`: the checkout's `.venv` with the Python reference peers.
    public static var venv: String? { ProcessInfo.processInfo.environment["BRIDGE_TEST_VENV"] }

    public static var hasVenv: Bool { venv != nil }

    /// The trait of every suite or test that needs the Python reference peers (relays, bitchat-cli,
    /// dbusmock, …). Without `BRIDGE_TEST_VENV` Swift Testing prints each such suite as skipped with this
    /// reason (`◇ Suite "…" skipped: "…"`), so a plain `swift test` that ran no interop or end-to-end test
    /// says so suite by suite instead of passing quietly.
    public static let needsVenv = ConditionTrait.enabled(
        if: hasVenv,
        "not run: needs BRIDGE_TEST_VENV (the Python reference peers); run scripts/test, or BRIDGE_TEST_VENV=$PWD/.venv swift test")

    /// `<venv>/bin/<name>` (python, nostr-relay, …).
    public static func venvBinary(_ name: String) -> String {
        (venv ?? ".venv") + "/bin/" + name
    }

    /// The `bitchat-bridge` executable built next to the test bundle (`swift build --build-tests` builds it).
    public static var bridgeExecutable: String { executable("bitchat-bridge") }

    /// An executable of this package built next to the test bundle (`bitchat-bridge`, the `AppPhone` test tool).
    public static func executable(_ name: String) -> String {
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = testBinary.deletingLastPathComponent()
        // On Linux the test binary is `<build>/debug/<Package>PackageTests.xctest`; the executable is beside it.
        while !directory.path.isEmpty, directory.path != "/" {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return ".build/debug/" + name
    }

    /// `$BRIDGE_TEST_ARTEFACTS`, or `test-artefacts/` at the root of this checkout (gitignored): where tests keep
    /// what a person looks at after the run (the console's screenshots). `scripts/test` prints it at the end.
    public static var artefactsRoot: String {
        if let root = ProcessInfo.processInfo.environment["BRIDGE_TEST_ARTEFACTS"], !root.isEmpty { return root }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("test-artefacts").path
    }

    /// `<artefactsRoot>/<name>`, emptied of the previous run's files, so what it holds after a run is that run's.
    public static func artefactsDirectory(_ name: String) throws -> String {
        let path = artefactsRoot + "/" + name
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A fresh private (0700) temporary directory (removed by the caller or left in /tmp for post-mortems).
    public static func temporaryDirectory(_ prefix: String = "bridge-test") -> String {
        let path = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString.prefix(8))"
        // 0700 whatever the umask: it is often a bridge data directory, which must not be group-writable.
        try? FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return path
    }
}
