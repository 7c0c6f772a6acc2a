#if canImport(Glibc)
import Glibc
#endif

/// The self-pipe that wakes an owner thread blocked in `poll()`: other threads ``poke()``, the owner polls
/// ``readFD`` and ``drain()``s it. Both ends are non-blocking and close-on-exec, and they are closed only when
/// the object goes away — never at the end of the loop — so a late poke cannot write into a descriptor
/// number that by then belongs to another file.
public final class WakePipe: Sendable {
    public let readFD: Int32
    private let writeFD: Int32

    public init() throws(FileError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw FileError(operation: "pipe", path: "(wake pipe)", code: errno) }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        readFD = fds[0]
        writeFD = fds[1]
    }

    deinit {
        close(readFD)
        close(writeFD)
    }

    /// Wakes the owner (a full pipe already means "awake", so a failed write is fine).
    public func poke() {
        var one: UInt8 = 1
        _ = write(writeFD, &one, 1)
    }

    /// Empties the pipe after a wake-up.
    public func drain() {
        var scratch = [UInt8](repeating: 0, count: 256)
        while read(readFD, &scratch, scratch.count) > 0 {}
    }
}
