import Foundation
import Testing
import BridgeTestSupport

/// The real `bitchat-bridge` binary against python-dbusmock's `bluez5` template on a private system bus
/// (plus our GATT additions): start-up errors, registration, the exported tree, the peripheral role and the
/// central role. The Python driver (Fixtures/fake_bluez_test.py) prints one CHECK line per assertion.
@Suite("BlueZ transport against a fake BlueZ (dbusmock)", TestEnvironment.needsVenv)
struct FakeBlueZTests {
    /// Runs a driver of Fixtures/ against the binary: (exit status, died of a signal, output, CHECK lines).
    static func drive(_ script: String) throws -> (ok: Bool, output: String, checks: [Substring]) {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
        let root = fixtures.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        // A file, not a pipe: a daemon the driver forks (dbus-daemon) could hold a pipe open past its exit.
        let logPath = TestEnvironment.temporaryDirectory("fake-bluez") + ".log"
        defer { try? FileManager.default.removeItem(atPath: logPath) }
        let result = try ChildProcess.run(
            TestEnvironment.venvBinary("python"),
            [fixtures.appendingPathComponent(script).path, TestEnvironment.bridgeExecutable, root.path],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": nil], output: .file(logPath))
        let output = try String(contentsOfFile: logPath, encoding: .utf8)
        let checks = output.split(separator: "\n").filter { $0.hasPrefix("CHECK ") }
        return (result.status == 0 && !result.diedOfSignal && !checks.contains { $0.hasPrefix("CHECK FAILED") }, output, checks)
    }

    @Test(.timeLimit(.minutes(2)))
    func bridgeAgainstFakeBlueZ() throws {
        let run = try Self.drive("fake_bluez_test.py")
        #expect(run.ok && run.output.contains("FAKE-BLUEZ PASS"), "\(run.output)")
        // Errors 4, registration 3 + tree 3, peripheral ≥ 10, central 6, power cycle 3, stop 1, run's /healthz 6.
        #expect(run.checks.count >= 34, "\(run.checks.count) checks")
    }

    @Test("doctor: bluetoothd, the adapter (present, powered, rfkill, LE roles), the D-Bus policy, main.conf", .timeLimit(.minutes(2)))
    func doctorAgainstFakeBlueZ() throws {
        let run = try Self.drive("doctor_bluez_test.py")
        #expect(run.ok && run.output.contains("DOCTOR-BLUEZ PASS"), "\(run.output)")
        #expect(run.checks.count >= 20, "\(run.checks.count) checks")
    }
}
