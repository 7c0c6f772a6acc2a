import Foundation
import Testing
import BridgeTestSupport

/// The real `bitchat-bridge` binary against python-dbusmock's `bluez5` template on a private system bus
/// (plus our GATT additions): start-up errors, registration, the exported tree, the peripheral role and the
/// central role. The Python driver (Fixtures/fake_bluez_test.py) prints one CHECK line per assertion.
@Suite("BlueZ transport against a fake BlueZ (dbusmock)", TestEnvironment.needsVenv)
struct FakeBlueZTests {
    @Test(.timeLimit(.minutes(2)))
    func bridgeAgainstFakeBlueZ() throws {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
        let root = fixtures.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        // A file, not a pipe: a daemon the driver forks (dbus-daemon) could hold a pipe open past its exit.
        let logPath = TestEnvironment.temporaryDirectory("fake-bluez") + ".log"
        defer { try? FileManager.default.removeItem(atPath: logPath) }
        let result = try ChildProcess.run(
            TestEnvironment.venvBinary("python"),
            [fixtures.appendingPathComponent("fake_bluez_test.py").path, TestEnvironment.bridgeExecutable, root.path],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": nil], output: .file(logPath))
        let output = try String(contentsOfFile: logPath, encoding: .utf8)
        let checks = output.split(separator: "\n").filter { $0.hasPrefix("CHECK ") }
        #expect(result.status == 0 && !result.diedOfSignal, "\(output)")
        #expect(output.contains("FAKE-BLUEZ PASS"), "\(output)")
        #expect(!checks.contains { $0.hasPrefix("CHECK FAILED") })
        // Errors 4, registration 3 + tree 3, peripheral ≥ 10, central 6, power cycle 3, stop 1, run's /healthz 6.
        #expect(checks.count >= 34, "\(checks.count) checks")
    }
}
