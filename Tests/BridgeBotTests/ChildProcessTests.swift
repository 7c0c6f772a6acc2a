import BridgeTestSupport
import Foundation
import Testing

@Suite("Child process output capture")
struct ChildProcessTests {
    /// The read handlers run on their own thread and can lag behind the child's exit under load: waiting for
    /// the exit (or for a line from a child that has exited) must also wait for the pipes' end of file.
    @Test("the last lines of a child that exits right after writing them are never lost")
    func lastLinesAfterExit() async throws {
        for i in 0..<20 {
            let child = try ChildProcess("/bin/sh", ["-c", "echo line-\(i); echo err-\(i) >&2"], name: "sh")
            #expect(try await child.waitForExit() == 0)
            #expect(child.stdoutLines == ["line-\(i)"] && child.stderrLines == ["err-\(i)"])
            let late = try ChildProcess("/bin/sh", ["-c", "echo late-\(i)"], name: "sh")
            while late.isRunning { try await Task.sleep(for: .milliseconds(1)) }
            _ = try await late.waitForLine("a line written just before the exit") { $0 == "late-\(i)" }
        }
    }
}
