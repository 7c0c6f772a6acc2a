public import Foundation
import Glibc
import Synchronization

/// A child process (a relay, a bridge, a scripted phone — in tests and in the demo): output captured line by
/// line, awaited under a deadline, and always stopped — by ``stop()`` or, as a last resort, on deinit.
///
/// Started with posix_spawn (``Spawn``), not Foundation's `Process`: the child gets an empty signal mask,
/// only descriptors 0/1/2, and its own process group. Each output pipe has one reader thread that owns its
/// descriptor: it reads until end of file (or until told to give up, see ``drainBound``) and then closes
/// it itself, so no descriptor is ever closed under a thread blocked in it, and a finished child leaves
/// no descriptor behind.
public final class ChildProcess: @unchecked Sendable {
    /// Why waiting on a child failed.
    public struct Timeout: Error, CustomStringConvertible {
        public let what: String
        public let output: String
        public var description: String { "timed out waiting for \(what); output so far:\n\(output)" }
    }

    /// How long, after the child's exit was first seen, its output is still awaited: the pipes reach end of
    /// file as soon as the child and everything that inherited them are gone, but a grandchild (a daemon the
    /// child started) may hold them open indefinitely. After this bound the readers give up and close.
    static let drainBound: Duration = .seconds(2)

    /// How often an idle reader looks at its stop flag: the longest a reader outlives ``stop()`` asking it to
    /// end while a grandchild still holds its pipe (``stop()`` waits for it, so that the descriptor is closed
    /// when it returns).
    static let readerPollMilliseconds: Int32 = 50

    /// What the readers collect; shared with them (they never hold the ChildProcess, so its deinit runs).
    private final class Capture: Sendable {
        struct State {
            var stdout: [String] = []
            /// When each stdout line was read (the reader polls every ``readerPollMilliseconds``).
            var stdoutTimes: [ContinuousClock.Instant] = []
            var stderr: [String] = []
            // Raw bytes until a newline: a read can end inside a multi-byte UTF-8 character.
            var partialOut: [UInt8] = []
            var partialErr: [UInt8] = []
            /// Readers that have ended (end of file, a read error, or ``giveUp``) and closed their descriptor.
            var readersEnded = 0
            /// Set once waiting for end of file is over: readers end at their next look.
            var giveUp = false
            /// When the child's exit was first seen by a waiter: the start of ``drainBound``.
            var drainDeadline: ContinuousClock.Instant?
        }
        let state = Mutex(State())

        func append(_ bytes: UnsafeRawBufferPointer, toStdout: Bool) {
            state.withLock { out in
                var partial = (toStdout ? out.partialOut : out.partialErr) + bytes
                var lines: [String] = []
                var start = 0
                while let newline = partial[start...].firstIndex(of: 0x0a) {
                    lines.append(String(decoding: partial[start..<newline], as: UTF8.self))
                    start = newline + 1
                }
                partial.removeFirst(start)
                if toStdout {
                    out.stdout += lines
                    out.stdoutTimes += repeatElement(ContinuousClock.now, count: lines.count)
                    out.partialOut = partial
                } else {
                    out.stderr += lines
                    out.partialErr = partial
                }
            }
        }

        /// Both readers reached end of file (or gave up): everything they will ever append is appended.
        var finished: Bool { state.withLock { $0.readersEnded == 2 } }
    }

    private let capture = Capture()
    /// Our end of the child's stdin; -1 once closed. Held locked during a write, so it is never closed (and
    /// its number reused) under a writer.
    private let stdinDescriptor: Mutex<Int32>
    /// The child's termination status once reaped (``Spawn/terminationStatus(_:)``).
    private let exitStatus = Mutex<Int32?>(nil)
    public let name: String
    public let pid: Int32
    /// The inode numbers of the child's stdin, stdout and stderr pipes: once the child is stopped or
    /// waited for, no descriptor of this process refers to any of them (`/proc/self/fd` shows a pipe as
    /// `pipe:[inode]`), which is how a test tells these pipes from whatever else the process has open.
    public let pipeInodes: [UInt64]

    /// Starts `executable` with `arguments`; `environment` entries are added to the current environment.
    /// A relative `executable` is relative to the current directory (not to `workingDirectory`).
    public init(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        workingDirectory: String? = nil,
        name: String? = nil
    ) throws {
        self.name = name ?? (executable as NSString).lastPathComponent
        var opened: [Int32] = []
        do {
            let input = try Spawn.pipe(executable)
            opened += [input.read, input.write]
            let output = try Spawn.pipe(executable)
            opened += [output.read, output.write]
            let errors = try Spawn.pipe(executable)
            opened += [errors.read, errors.write]
            pid = try Spawn.start(
                executable, arguments,
                environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                workingDirectory: workingDirectory,
                stdio: [.descriptor(input.read), .descriptor(output.write), .descriptor(errors.write)]
            )
            pipeInodes = [input.write, output.read, errors.read].map { fd in
                var status = stat()
                return fstat(fd, &status) == 0 ? UInt64(status.st_ino) : 0
            }
            // The child has its copies; ours of its ends go, so end of file comes when the child's do.
            for fd in [input.read, output.write, errors.write] { close(fd) }
            stdinDescriptor = Mutex(input.write)
            for (fd, toStdout) in [(output.read, true), (errors.read, false)] {
                let capture = self.capture
                let thread = Thread { Self.readLoop(fd, toStdout: toStdout, capture: capture) }
                thread.name = "ChildProcess \(self.name) \(toStdout ? "stdout" : "stderr")"
                thread.start()
            }
        } catch {
            for fd in opened { close(fd) }
            throw error
        }
    }

    deinit {
        // Nobody can read the output any more: no draining, the readers end at their next look.
        kill(signal: SIGKILL, grace: .zero)
        closeStdin()
        capture.state.withLock { $0.giveUp = true }
    }

    /// One pipe's reader: poll (so that ``Capture/State/giveUp`` is seen while a grandchild keeps the pipe
    /// open and silent), read, append; at end of file or when told to give up, close the descriptor.
    private static func readLoop(_ fd: Int32, toStdout: Bool, capture: Capture) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 1)
        defer { buffer.deallocate() }
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while !capture.state.withLock({ $0.giveUp }) {
            poller.revents = 0
            let ready = poll(&poller, 1, readerPollMilliseconds)
            if ready == 0 || (ready < 0 && errno == EINTR) { continue }
            if ready < 0 { break }
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count > 0 {
                capture.append(UnsafeRawBufferPointer(rebasing: buffer[..<count]), toStdout: toStdout)
            } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                break  // end of file (every writer gone) or an unreadable pipe
            }
        }
        close(fd)
        capture.state.withLock { $0.readersEnded += 1 }
    }

    /// The termination status once the child has exited (reaping it), nil while it runs. A child reaped
    /// elsewhere (SIGCHLD ignored, or a `waitpid(-1)` in this process) counts as exited with status -1.
    private func reap() -> Int32? {
        exitStatus.withLock { status in
            if status != nil { return status }
            var raw: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &raw, WNOHANG) } while result < 0 && errno == EINTR
            if result == pid {
                status = Spawn.terminationStatus(raw)
            } else if result < 0 {
                status = -1
            }
            return status
        }
    }

    public var isRunning: Bool { reap() == nil }

    /// Every complete stdout line so far.
    public var stdoutLines: [String] { capture.state.withLock { $0.stdout } }
    /// Every complete stdout line so far with the moment it was read (within ``readerPollMilliseconds`` of its writing):
    /// for tests about when a child saw something.
    public var timedStdoutLines: [(at: ContinuousClock.Instant, line: String)] {
        capture.state.withLock { Array(zip($0.stdoutTimes, $0.stdout)).map { ($0.0, $0.1) } }
    }
    /// Every complete stderr line so far.
    public var stderrLines: [String] { capture.state.withLock { $0.stderr } }

    /// Writes `text` to the child's stdin; nothing once stdin is closed or the child stopped reading it
    /// (a write to a pipe nobody reads fails with EPIPE and raises no SIGPIPE here:
    /// ``Spawn/writeWithoutSIGPIPE(_:_:)``). Blocks while the pipe is full, as a pipe write does.
    public func write(_ text: String) {
        stdinDescriptor.withLock { fd in
            guard fd >= 0 else { return }
            Spawn.writeWithoutSIGPIPE(fd, Array(text.utf8)[...])
        }
    }

    public func closeStdin() {
        stdinDescriptor.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    /// Waits until some stdout (or, with `stderr: true`, stderr) line satisfies `predicate`; returns it.
    ///
    /// Every wait here looks once more after its deadline has passed: on a busy machine (2 cores, CPU-bound
    /// tests in parallel) a waiting task can go unscheduled for longer than its timeout, and a condition
    /// that came true meanwhile must not be reported as a timeout.
    @discardableResult
    public func waitForLine(
        stderr: Bool = false,
        timeout: Duration = .seconds(60),
        _ what: String,
        where predicate: (String) -> Bool
    ) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            // Read before looking, so the last look comes after the deadline.
            let expired = ContinuousClock.now >= deadline
            let lines = stderr ? stderrLines : stdoutLines
            if let line = lines.first(where: predicate) { return line }
            if let status = reap() {
                await drained()
                if let line = (stderr ? stderrLines : stdoutLines).first(where: predicate) { return line }
                throw Timeout(what: "\(what) (\(name) exited with \(status))", output: transcript)
            }
            if expired { throw Timeout(what: what, output: transcript) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits until at least `count` stdout lines satisfy `predicate`; returns them.
    public func waitForLines(
        count: Int,
        timeout: Duration = .seconds(60),
        _ what: String,
        where predicate: (String) -> Bool
    ) async throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let expired = ContinuousClock.now >= deadline
            let matching = stdoutLines.filter(predicate)
            if matching.count >= count { return matching }
            if expired { throw Timeout(what: "\(count) × \(what)", output: transcript) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits for the process to exit by itself and returns its status (the exit code, or the number of the
    /// signal that ended it), after its output is read (``drained()``).
    public func waitForExit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = reap() {
                await drained()
                return status
            }
            guard ContinuousClock.now < deadline else { throw Timeout(what: "\(name) to exit", output: transcript) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The first call after the exit starts ``drainBound``; later calls share its deadline.
    private func drainDeadline() -> ContinuousClock.Instant {
        capture.state.withLock { state in
            if let deadline = state.drainDeadline { return deadline }
            let deadline = ContinuousClock.now + Self.drainBound
            state.drainDeadline = deadline
            return deadline
        }
    }

    /// After the child exited: closes its stdin (nobody reads it any more), waits until both readers saw
    /// end of file, so everything it wrote is in the lines (the readers can lag behind the exit under
    /// load) — at most until ``drainBound`` after the exit was first seen; then the readers are told to
    /// give up, and have closed their descriptors when this returns, as after ``stop(signal:grace:)``.
    private func drained() async {
        closeStdin()
        let deadline = drainDeadline()
        while !capture.finished, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        if !capture.finished { capture.state.withLock { $0.giveUp = true } }
        // A reader that gave up ends within one poll interval.
        while !capture.finished { try? await Task.sleep(for: .milliseconds(2)) }
    }

    /// Sends `signal`, waits up to `grace` for the exit and then sends SIGKILL; reaps the child.
    private func kill(signal: Int32, grace: Duration) {
        guard reap() == nil else { return }
        Glibc.kill(pid, signal)
        let deadline = ContinuousClock.now + grace
        while reap() == nil, ContinuousClock.now < deadline { usleep(2_000) }
        guard reap() == nil else { return }
        Glibc.kill(pid, SIGKILL)
        // SIGKILL cannot be caught: the wait is for the kernel to tear the process down.
        while reap() == nil { usleep(1_000) }
    }

    /// Sends `signal` (SIGTERM by default) and reaps the child; a child still running after `grace`
    /// (some relays ignore SIGTERM) is killed with SIGKILL. Then releases the pipes: stdin is closed, the
    /// output is read to its end (bounded by ``drainBound``, as in ``waitForExit(timeout:)``) and both
    /// readers have closed their descriptors when this returns. The lines stay readable.
    public func stop(signal: Int32 = SIGTERM, grace: Duration = .seconds(5)) {
        kill(signal: signal, grace: grace)
        closeStdin()
        let deadline = drainDeadline()
        while !capture.finished, ContinuousClock.now < deadline { usleep(2_000) }
        capture.state.withLock { $0.giveUp = true }
        // A reader that gave up ends within one poll interval.
        while !capture.finished { usleep(2_000) }
    }

    /// stdout and stderr so far, for failure messages.
    public var transcript: String {
        capture.state.withLock { "--- \(name) stdout\n" + $0.stdout.joined(separator: "\n") + "\n--- \(name) stderr\n" + $0.stderr.joined(separator: "\n") }
    }
}
