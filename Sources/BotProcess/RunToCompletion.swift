import Foundation
import Glibc

extension ChildProcess {
    /// Where ``run(_:_:environment:input:output:)`` sends the child's stdout and stderr.
    public enum Output: Sendable {
        /// Read into ``Completed/stdout`` and ``Completed/stderr``.
        case capture
        /// /dev/null.
        case discard
        /// Both into this file (created or truncated): for a child whose own children (a daemon it forks)
        /// may outlive it holding the descriptors — a pipe would not reach end of file until they exit.
        case file(String)
    }

    /// A child that ran to completion.
    public struct Completed: Sendable {
        /// The exit code, or the number of the signal that ended the child (see ``diedOfSignal``).
        public let status: Int32
        public let diedOfSignal: Bool
        /// Everything the child wrote (empty unless the output was ``Output/capture``), decoded as UTF-8.
        public let stdout: String
        public let stderr: String
    }

    /// Runs `executable` synchronously to its end, spawned as ``ChildProcess`` spawns (``Spawn``): clean
    /// signal mask, only 0/1/2 inherited. `environment` entries are added to the current environment, a nil
    /// value removes the variable. `input` is written to the child's stdin, which is then closed (no input:
    /// stdin is /dev/null). With ``Output/capture`` the call returns once both pipes reached end of file
    /// and the child was reaped — there is no time bound: meant for short commands whose output ends with
    /// them (a test with a deadline puts a time limit on itself).
    public static func run(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String?] = [:],
        input: String? = nil,
        output: Output = .capture
    ) throws -> Completed {
        var childEnvironment = ProcessInfo.processInfo.environment
        for (key, value) in environment { childEnvironment[key] = value }
        var ours: [Int32] = []  // our pipe ends, closed on the way out
        var theirs: [Int32] = []  // the child's pipe ends, closed once it has them
        defer { for fd in ours + theirs { close(fd) } }

        var stdio: [Spawn.Stdio] = []
        var stdinEnd: Int32 = -1
        if input != nil {
            let pipe = try Spawn.pipe(executable)
            ours.append(pipe.write)
            theirs.append(pipe.read)
            stdinEnd = pipe.write
            // Non-blocking: the loop below writes only what fits and reads the child's output meanwhile
            // (a child that answers before reading all its input would otherwise deadlock with us).
            _ = fcntl(stdinEnd, F_SETFL, fcntl(stdinEnd, F_GETFL) | O_NONBLOCK)
            stdio.append(.descriptor(pipe.read))
        } else {
            stdio.append(.open("/dev/null", flags: O_RDONLY))
        }
        var outputEnds: [Int32] = []
        switch output {
        case .capture:
            for _ in 0..<2 {
                let pipe = try Spawn.pipe(executable)
                ours.append(pipe.read)
                theirs.append(pipe.write)
                outputEnds.append(pipe.read)
                stdio.append(.descriptor(pipe.write))
            }
        case .discard:
            stdio += [.open("/dev/null", flags: O_WRONLY), .sameAs(1)]
        case .file(let path):
            stdio += [.open(path, flags: O_WRONLY | O_CREAT | O_TRUNC), .sameAs(1)]
        }

        let pid = try Spawn.start(executable, arguments, environment: childEnvironment.compactMapValues { $0 },
                                  workingDirectory: nil, stdio: stdio)
        for fd in theirs { close(fd) }
        theirs = []

        var pendingInput = Array((input ?? "").utf8)[...]
        var collected: [[UInt8]] = [[], []]
        var open = outputEnds  // -1 once at end of file
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 1)
        defer { buffer.deallocate() }
        if stdinEnd >= 0, pendingInput.isEmpty { closeOurs(&stdinEnd, in: &ours) }
        while stdinEnd >= 0 || open.contains(where: { $0 >= 0 }) {
            var pollers = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            pollers.append(pollfd(fd: stdinEnd, events: Int16(POLLOUT), revents: 0))  // fd -1 is skipped by poll
            let ready = poll(&pollers, nfds_t(pollers.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            for i in open.indices where open[i] >= 0 && pollers[i].revents != 0 {
                let count = read(open[i], buffer.baseAddress, buffer.count)
                if count > 0 {
                    collected[i] += UnsafeRawBufferPointer(rebasing: buffer[..<count])
                } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                    open[i] = -1
                }
            }
            if stdinEnd >= 0, pollers[open.count].revents != 0 {
                let (written, stillOpen) = Spawn.writeWithoutSIGPIPE(stdinEnd, pendingInput)
                pendingInput = pendingInput.dropFirst(written)
                if !stillOpen || pendingInput.isEmpty { closeOurs(&stdinEnd, in: &ours) }
            }
        }

        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 {
            guard errno == EINTR else {
                throw SpawnError(executable: executable, reason: "waitpid: \(String(cString: strerror(errno)))")
            }
        }
        return Completed(
            status: Spawn.terminationStatus(raw), diedOfSignal: Spawn.diedOfSignal(raw),
            stdout: String(decoding: collected[0], as: UTF8.self), stderr: String(decoding: collected[1], as: UTF8.self)
        )
    }

    /// Closes our stdin end early (the child sees end of file) and forgets it.
    private static func closeOurs(_ fd: inout Int32, in ours: inout [Int32]) {
        close(fd)
        ours.removeAll { $0 == fd }
        fd = -1
    }
}
