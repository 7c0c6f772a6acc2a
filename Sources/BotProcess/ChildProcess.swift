public import Foundation
import Synchronization

/// A child process (a relay, a bridge, a scripted phone — in tests and in the demo): output captured line by
/// line, awaited under a deadline, and always stopped — by ``stop()`` or, as a last resort, on deinit.
public final class ChildProcess: @unchecked Sendable {
    /// Why waiting on a child failed.
    public struct Timeout: Error, CustomStringConvertible {
        public let what: String
        public let output: String
        public var description: String { "timed out waiting for \(what); output so far:\n\(output)" }
    }

    private let process = Process()
    private let stdoutPipe = Pipe()
    private let stderrPipe = Pipe()
    private let stdinPipe = Pipe()
    private struct Output {
        var stdout: [String] = []
        var stderr: [String] = []
        // Raw bytes until a newline: a read can end inside a multi-byte UTF-8 character.
        var partialOut: [UInt8] = []
        var partialErr: [UInt8] = []
        /// Read handlers between taking bytes off a pipe and appending them.
        var reading = 0
    }
    private let output = Mutex(Output())
    public let name: String

    /// Starts `executable` with `arguments`; `environment` entries are added to the current environment.
    public init(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        workingDirectory: String? = nil,
        name: String? = nil
    ) throws {
        self.name = name ?? (executable as NSString).lastPathComponent
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if let workingDirectory { process.currentDirectoryURL = URL(fileURLWithPath: workingDirectory) }
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        process.standardInput = stdinPipe
        stdoutPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            self?.read(handle, toStdout: true)
        }
        stderrPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            self?.read(handle, toStdout: false)
        }
        try process.run()
    }

    deinit { stop(signal: SIGKILL) }

    /// Counted as `reading` from before the bytes leave the pipe until they are appended, so ``drained()``
    /// never sees an empty pipe while a line is still on its way into `output`.
    private func read(_ handle: FileHandle, toStdout: Bool) {
        output.withLock { $0.reading += 1 }
        append(handle.availableData, toStdout: toStdout)
        output.withLock { $0.reading -= 1 }
    }

    private func append(_ data: Data, toStdout: Bool) {
        guard !data.isEmpty else { return }
        output.withLock { out in
            var partial = (toStdout ? out.partialOut : out.partialErr) + [UInt8](data)
            var lines: [String] = []
            while let newline = partial.firstIndex(of: 0x0a) {
                lines.append(String(decoding: partial[..<newline], as: UTF8.self))
                partial.removeSubrange(...newline)
            }
            if toStdout {
                out.stdout += lines
                out.partialOut = partial
            } else {
                out.stderr += lines
                out.partialErr = partial
            }
        }
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// Every complete stdout line so far.
    public var stdoutLines: [String] { output.withLock { $0.stdout } }
    /// Every complete stderr line so far.
    public var stderrLines: [String] { output.withLock { $0.stderr } }

    /// Writes `text` to the child's stdin.
    public func write(_ text: String) {
        stdinPipe.fileHandleForWriting.write(Data(text.utf8))
    }

    public func closeStdin() { try? stdinPipe.fileHandleForWriting.close() }

    /// Waits until some stdout (or, with `stderr: true`, stderr) line satisfies `predicate`; returns it.
    @discardableResult
    public func waitForLine(
        stderr: Bool = false,
        timeout: Duration = .seconds(60),
        _ what: String,
        where predicate: (String) -> Bool
    ) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let lines = stderr ? stderrLines : stdoutLines
            if let line = lines.first(where: predicate) { return line }
            if !process.isRunning, await drained(), (stderr ? stderrLines : stdoutLines).first(where: predicate) == nil {
                throw Timeout(what: "\(what) (\(name) exited with \(process.terminationStatus))", output: transcript)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Timeout(what: what, output: transcript)
    }

    /// Waits until at least `count` stdout lines satisfy `predicate`; returns them.
    public func waitForLines(
        count: Int,
        timeout: Duration = .seconds(60),
        _ what: String,
        where predicate: (String) -> Bool
    ) async throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let matching = stdoutLines.filter(predicate)
            if matching.count >= count { return matching }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Timeout(what: "\(count) × \(what)", output: transcript)
    }

    /// Waits for the process to exit by itself and returns its status.
    public func waitForExit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else { throw Timeout(what: "\(name) to exit", output: transcript) }
            try await Task.sleep(for: .milliseconds(20))
        }
        await drained()
        return process.terminationStatus
    }

    /// After the child exited: waits until everything it wrote has been read (the read handlers run on
    /// their own thread and can lag behind the exit under load): neither pipe holds unread bytes and no
    /// handler is between its read and its append. Bounded (2 s): a grandchild that inherited the pipes may
    /// keep writing. Always returns true.
    @discardableResult
    private func drained() async -> Bool {
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            let idle = output.withLock { $0.reading == 0 }
            if idle, Self.unread(stdoutPipe) == 0, Self.unread(stderrPipe) == 0, output.withLock({ $0.reading == 0 }) { break }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// Bytes waiting in `pipe` (FIONREAD); unknown counts as some.
    private static func unread(_ pipe: Pipe) -> Int32 {
        var count: Int32 = 0
        return ioctl(pipe.fileHandleForReading.fileDescriptor, UInt(FIONREAD), &count) == 0 ? count : 1
    }

    /// Sends `signal` (SIGTERM by default) and reaps the child; a child still running after `grace`
    /// (some relays ignore SIGTERM) is killed with SIGKILL.
    public func stop(signal: Int32 = SIGTERM, grace: Duration = .seconds(5)) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, signal)
        let deadline = ContinuousClock.now + grace
        while process.isRunning, ContinuousClock.now < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// stdout and stderr so far, for failure messages.
    public var transcript: String {
        output.withLock { "--- \(name) stdout\n" + $0.stdout.joined(separator: "\n") + "\n--- \(name) stderr\n" + $0.stderr.joined(separator: "\n") }
    }
}
