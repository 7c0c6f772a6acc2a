import BridgeTestSupport
import Foundation
import Testing

@Suite("Child process output capture")
struct ChildProcessTests {
    /// A waiter that was not scheduled until after its deadline still looks once: a line (or lines) already
    /// there is returned, not reported as a timeout (on a busy machine a task can sleep past its deadline).
    @Test("a wait looks once more after its deadline")
    func waitLooksAfterTheDeadline() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "echo one; echo two"], name: "sh")
        #expect(try await child.waitForExit() == 0)
        #expect(try await child.waitForLine(timeout: .zero, "one") { $0 == "one" } == "one")
        #expect(try await child.waitForLines(count: 2, timeout: .zero, "both") { !$0.isEmpty } == ["one", "two"])
        await #expect(throws: ChildProcess.Timeout.self) {
            try await child.waitForLines(count: 3, timeout: .zero, "three lines") { !$0.isEmpty }
        }
    }

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

/// Descriptors open in this process.
/// The inodes of the pipes this process has a descriptor of (`/proc/self/fd/N -> pipe:[inode]`).
private func openPipeInodes() -> Set<UInt64> {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return Set(entries.compactMap { entry in
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)"),
              target.hasPrefix("pipe:["), target.hasSuffix("]") else { return nil }
        return UInt64(target.dropFirst(6).dropLast())
    })
}

/// The `SigBlk:` mask (hex) of process `pid`, from /proc.
private func blockedSignals(_ pid: Int32) -> String? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    return status.split(separator: "\n").first { $0.hasPrefix("SigBlk:") }.map { $0.dropFirst(7).trimmingCharacters(in: .whitespaces) }
}

@Suite("Child process signals, descriptors and stdin", .serialized)
struct ChildProcessLifecycleTests {
    /// Swift-concurrency worker threads block most signals; a child must not inherit that mask, or SIGTERM
    /// stays pending and every stop() ends in SIGKILL after the whole grace.
    @Test("a child started from async code has no blocked signals, and stop() ends it with SIGTERM at once")
    func cleanSignalMask() async throws {
        let child = try ChildProcess("/bin/sleep", ["30"], name: "sleep")
        #expect(blockedSignals(child.pid) == "0000000000000000")
        let started = ContinuousClock.now
        child.stop()
        let took = ContinuousClock.now - started
        #expect(took < .seconds(1), "stop() took \(took)")
        #expect(!child.isRunning)
        #expect(try await child.waitForExit(timeout: .seconds(1)) == SIGTERM)
    }

    /// A finished child's pipes are closed: after each of 60 children is stopped or waited for, none of
    /// its three pipes is open in this process any more. (Counting all descriptors before and after, as
    /// this test once did, also counted the sockets and pipes of suites running alongside: 34 more in a
    /// run beside two end-to-end suites.) The test process once reached ~1,400 open descriptors.
    @Test("stopping or waiting for a child closes its pipes; its lines stay readable afterwards")
    func finishedChildrenReleaseTheirPipes() async throws {
        for i in 0..<60 {
            // A sleep far longer than the test: a loaded CI run once took over 30 s from spawn to stop, and the
            // child had exited 0 on its own by then.
            let child = try ChildProcess("/bin/sh", ["-c", "echo out-\(i); echo err-\(i) >&2; exec sleep 600"], name: "sh")
            _ = try await child.waitForLine("its line") { $0 == "out-\(i)" }
            // The shell writes its stderr line after the stdout one: stopping before it is written would
            // test the shell's timing, not the pipes.
            _ = try await child.waitForLine(stderr: true, "its stderr line") { $0 == "err-\(i)" }
            let started = ContinuousClock.now
            if i % 2 == 0 {
                child.stop()
                let status = try await child.waitForExit()
                #expect(status == SIGTERM, "child \(i): status \(status) after SIGTERM\n\(child.transcript)")
            } else {
                child.stop(signal: SIGKILL)
                let status = try await child.waitForExit()
                #expect(status == SIGKILL, "child \(i): status \(status) after SIGKILL\n\(child.transcript)")
            }
            #expect(ContinuousClock.now - started < .seconds(1))
            _ = try await child.waitForLine(timeout: .seconds(1), "its line after stop") { $0 == "out-\(i)" }
            #expect(child.stderrLines == ["err-\(i)"])
            child.write("ignored\n")
            let stillOpen = openPipeInodes().intersection(child.pipeInodes)
            #expect(child.pipeInodes.allSatisfy { $0 != 0 } && stillOpen.isEmpty, "child \(i): pipes \(stillOpen) still open")
        }
        let quick = try ChildProcess("/bin/echo", ["done"], name: "echo")
        #expect(try await quick.waitForExit() == 0)
        #expect(quick.stdoutLines == ["done"])
        #expect(openPipeInodes().isDisjoint(with: quick.pipeInodes))
    }

    /// A grandchild that inherited the pipes (here a background `sleep`) keeps them open after the child
    /// exits: waiting is bounded (2 s of draining), and the lines written before the exit are there.
    @Test("a grandchild holding the pipes does not hang waitForExit")
    func grandchildHoldingThePipes() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "echo first; sleep 6 & echo last"], name: "sh")
        let started = ContinuousClock.now
        #expect(try await child.waitForExit(timeout: .seconds(10)) == 0)
        let took = ContinuousClock.now - started
        #expect(took < .seconds(4), "waitForExit took \(took)")
        #expect(child.stdoutLines == ["first", "last"])
        child.stop()
    }

    /// Writing to the stdin of a child that has exited (its read end closed) fails quietly: no SIGPIPE
    /// kills this process, and closing afterwards is harmless too.
    @Test("writing to a dead child's stdin is harmless")
    func writeToDeadChild() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "exec 0<&-; echo closed; sleep 0.3"], name: "sh")
        _ = try await child.waitForLine("stdin closed") { $0 == "closed" }
        for _ in 0..<3 { child.write(String(repeating: "x", count: 100_000) + "\n") }
        #expect(try await child.waitForExit() == 0)
        child.write("after exit\n")
        child.closeStdin()
        child.write("after close\n")
        let cat = try ChildProcess("/bin/cat", [], name: "cat")
        cat.write("echoed\n")
        _ = try await cat.waitForLine("cat echoes stdin") { $0 == "echoed" }
        cat.closeStdin()
        #expect(try await cat.waitForExit() == 0)
    }

    @Test("a missing executable is a thrown error naming the path")
    func missingExecutable() {
        #expect {
            _ = try ChildProcess("/nonexistent/tool", ["x"])
        } throws: { error in
            "\(error)".contains("/nonexistent/tool")
        }
    }

    @Test("workingDirectory and environment reach the child")
    func workingDirectoryAndEnvironment() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "pwd; echo \"$CHILD_TEST_VALUE\""], environment: ["CHILD_TEST_VALUE": "v 1"],
                                     workingDirectory: "/usr/bin", name: "sh")
        #expect(try await child.waitForExit() == 0)
        #expect(child.stdoutLines == ["/usr/bin", "v 1"])
    }
}

@Suite("Running a child to completion")
struct ChildProcessRunTests {
    @Test("input reaches stdin, stdout and stderr are captured whole, the status and a signal death are reported")
    func captureInputAndStatus() throws {
        let input = String(repeating: "0123456789abcdef", count: 20_000)  // 320 kB: more than a pipe holds
        let copied = try ChildProcess.run("/bin/sh", ["-c", "cat; printf tail; echo oops >&2; exit 3"], input: input)
        #expect(copied.status == 3 && !copied.diedOfSignal)
        #expect(copied.stdout == input + "tail" && copied.stderr == "oops\n")
        let killed = try ChildProcess.run("/bin/sh", ["-c", "kill -TERM $$"])
        #expect(killed.status == SIGTERM && killed.diedOfSignal)
        let ignoring = try ChildProcess.run("/bin/sh", ["-c", "exec 0<&-; exit 0"], input: input)
        #expect(ignoring.status == 0)
    }

    @Test("environment entries are added or removed; output can go to a file or nowhere")
    func environmentAndOutputTargets() throws {
        setenv("CHILD_RUN_REMOVED", "present", 1)
        defer { unsetenv("CHILD_RUN_REMOVED") }
        let shown = try ChildProcess.run("/bin/sh", ["-c", "echo \"${CHILD_RUN_REMOVED-unset} $CHILD_RUN_ADDED\""],
                                         environment: ["CHILD_RUN_REMOVED": nil, "CHILD_RUN_ADDED": "added"])
        #expect(shown.stdout == "unset added\n")
        let path = TestEnvironment.temporaryDirectory("child-run") + ".log"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let logged = try ChildProcess.run("/bin/sh", ["-c", "echo out; echo err >&2"], output: .file(path))
        #expect(logged.status == 0 && logged.stdout.isEmpty)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "out\nerr\n")
        #expect(try ChildProcess.run("/bin/echo", ["x"], output: .discard).stdout.isEmpty)
        #expect(throws: SpawnError.self) { try ChildProcess.run("/nonexistent/run", []) }
    }
}
