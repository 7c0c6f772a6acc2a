import Foundation
import Glibc

/// Why a child could not be started.
public struct SpawnError: Error, CustomStringConvertible {
    public let executable: String
    public let reason: String
    public var description: String { "cannot start \(executable): \(reason)" }
}

/// posix_spawn with the child's view of the world set explicitly, instead of Foundation's `Process`:
///
/// - **Signals.** `Process.run()` spawns from the calling thread without `POSIX_SPAWN_SETSIGMASK`, and
///   Swift-concurrency/Dispatch worker threads block almost every signal, so its children started with
///   SIGTERM and SIGINT blocked (a `stop()` then always ended in SIGKILL after the grace). Here the child's
///   mask is empty and ``defaultSignals`` are reset to their default action (an ignored disposition would
///   otherwise survive exec).
/// - **Descriptors.** Only 0, 1 and 2 reach the child (`posix_spawn_file_actions_addclosefrom_np(3)`,
///   glibc ≥ 2.34), and there is no `/proc/self/fd` scan in this process (Foundation 6.3.1's scan over-reads
///   each dirent and can fault with many descriptors open: swift-corelibs-foundation PR #5472).
/// - **Process group.** The child leads a new group, as under Foundation: a Ctrl-C at the terminal reaches
///   the parent, which stops its children itself (the demo relies on this).
enum Spawn {
    /// What becomes one of the child's descriptors 0, 1, 2.
    enum Stdio {
        /// This descriptor of ours (duplicated; ours stays open and is closed by the caller).
        case descriptor(Int32)
        /// A file opened in the child with `flags` (e.g. /dev/null, a log file).
        case open(String, flags: Int32)
        /// The same open file as the child's descriptor `n` (an earlier entry).
        case sameAs(Int32)
    }

    /// Signals the child starts with at their default action: the ones a parent commonly ignores or
    /// handles (a handled signal reverts at exec anyway; an ignored one would not).
    static let defaultSignals: [Int32] = [SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD]

    /// `posix_spawn_file_actions_addclosefrom_np`, `posix_spawn_file_actions_addchdir_np` and `pipe2` are
    /// GNU extensions that Swift's Glibc module does not declare (it is built without `_GNU_SOURCE`); they
    /// are looked up once in the C library by name and called through their C signatures.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    private typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
    private static let closeFrom: CloseFrom? = symbol("posix_spawn_file_actions_addclosefrom_np")
    private static let changeDirectory: ChangeDirectory? = symbol("posix_spawn_file_actions_addchdir_np")
    private static let pipe2: Pipe2? = symbol("pipe2")

    private static func symbol<T>(_ name: String) -> T? {
        // RTLD_DEFAULT is the null handle in glibc: search the global scope (libc is always loaded).
        guard let address = dlsym(nil, name) else { return nil }
        return unsafeBitCast(address, to: T.self)
    }

    /// `path` made absolute against the current directory: the child changes directory before exec, and a
    /// relative executable must mean what it means to the caller (as with Foundation's file URLs).
    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return FileManager.default.currentDirectoryPath + "/" + path
    }

    /// Starts `executable` (argv[0] is its absolute path, as under Foundation) and returns its pid.
    /// `environment` is the child's whole environment.
    static func start(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String],
        workingDirectory: String?,
        stdio: [Stdio]
    ) throws(SpawnError) -> pid_t {
        let path = absolute(executable)
        func failure(_ reason: String) -> SpawnError { SpawnError(executable: path, reason: reason) }
        func failure(_ call: String, _ code: Int32) -> SpawnError { failure("\(call): \(String(cString: strerror(code)))") }
        guard access(path, X_OK) == 0 else { throw failure("not an executable file (\(String(cString: strerror(errno))))") }
        guard let closeFrom else { throw failure("posix_spawn_file_actions_addclosefrom_np is missing (glibc ≥ 2.34 needed)") }

        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { throw failure("posix_spawn_file_actions_init", errno) }
        defer { posix_spawn_file_actions_destroy(&actions) }
        guard posix_spawnattr_init(&attributes) == 0 else { throw failure("posix_spawnattr_init", errno) }
        defer { posix_spawnattr_destroy(&attributes) }

        var code: Int32 = 0
        for (target, source) in stdio.enumerated() {
            let target = Int32(target)
            switch source {
            case .descriptor(let fd):
                // dup2 onto a different number clears close-on-exec on the copy (our pipe ends have it set).
                code = posix_spawn_file_actions_adddup2(&actions, fd, target)
            case .open(let file, let flags):
                code = posix_spawn_file_actions_addopen(&actions, target, file, flags, 0o644)
            case .sameAs(let other):
                code = posix_spawn_file_actions_adddup2(&actions, other, target)
            }
            guard code == 0 else { throw failure("posix_spawn_file_actions (fd \(target))", code) }
        }
        code = closeFrom(&actions, Int32(stdio.count))
        guard code == 0 else { throw failure("posix_spawn_file_actions_addclosefrom_np", code) }
        if let workingDirectory {
            guard let changeDirectory else { throw failure("posix_spawn_file_actions_addchdir_np is missing (glibc ≥ 2.29 needed)") }
            code = changeDirectory(&actions, workingDirectory)
            guard code == 0 else { throw failure("posix_spawn_file_actions_addchdir_np", code) }
        }

        var empty = sigset_t()
        sigemptyset(&empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in defaultSignals { sigaddset(&defaults, signal) }
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP
        code = posix_spawnattr_setflags(&attributes, Int16(flags))
        if code == 0 { code = posix_spawnattr_setsigmask(&attributes, &empty) }
        if code == 0 { code = posix_spawnattr_setsigdefault(&attributes, &defaults) }
        if code == 0 { code = posix_spawnattr_setpgroup(&attributes, 0) }
        guard code == 0 else { throw failure("posix_spawnattr", code) }

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        // glibc's posix_spawn reports a failed exec (and failed file actions) as its return value.
        code = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard code == 0 else { throw failure("posix_spawn", code) }
        return pid
    }

    /// A pipe whose two ends are close-on-exec and above 0/1/2 (so that the child's dup2 onto 0/1/2 never
    /// overwrites another of its pipe ends, even in a parent that runs with a standard descriptor closed).
    static func pipe(_ executable: String) throws(SpawnError) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        // Close-on-exec from the start (pipe + fcntl would leave a window for another thread's spawn).
        guard let pipe2 else { throw SpawnError(executable: executable, reason: "pipe2 is missing from the C library") }
        guard pipe2(&ends, O_CLOEXEC) == 0 else {
            throw SpawnError(executable: executable, reason: "pipe2: \(String(cString: strerror(errno)))")
        }
        for i in 0..<2 where ends[i] < 3 {
            let moved = fcntl(ends[i], F_DUPFD_CLOEXEC, 3)
            let code = errno
            close(ends[i])
            ends[i] = moved
            guard moved >= 0 else {
                for fd in ends where fd >= 0 { close(fd) }
                throw SpawnError(executable: executable, reason: "fcntl(F_DUPFD_CLOEXEC): \(String(cString: strerror(code)))")
            }
        }
        return (ends[0], ends[1])
    }

    /// Decodes a `waitpid` status as Foundation's `terminationStatus` did: the exit code, or for a death by
    /// signal the signal's number. (WIFEXITED and friends are C macros Swift does not import.)
    static func terminationStatus(_ raw: Int32) -> Int32 {
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : signal
    }

    /// True when the raw `waitpid` status is a death by signal.
    static func diedOfSignal(_ raw: Int32) -> Bool { raw & 0x7f != 0 && raw & 0x7f != 0x7f }

    /// Writes `bytes` to `fd` without risking SIGPIPE for this process: SIGPIPE is blocked on the calling
    /// thread during the write, and the one a write to a closed pipe raises (thread-directed) is consumed
    /// with `sigtimedwait` before the old mask returns — unless one was already pending, which is left
    /// alone. Writes until all is written, the reader is gone (EPIPE; `open` false), another error (`open`
    /// false) or, on a non-blocking descriptor, a full pipe (EAGAIN; `open` true).
    @discardableResult
    static func writeWithoutSIGPIPE(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> (written: Int, open: Bool) {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        var pending = sigset_t()
        sigpending(&pending)
        let alreadyPending = sigismember(&pending, SIGPIPE) == 1

        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written >= 0 {
                offset += written
                continue
            }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN { return (offset, true) }
            if code == EPIPE, !alreadyPending {
                var now = timespec(tv_sec: 0, tv_nsec: 0)
                while sigtimedwait(&pipeSignal, nil, &now) == SIGPIPE {}
            }
            return (offset, false)
        }
        return (offset, true)
    }
}
