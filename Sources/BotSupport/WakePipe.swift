#if canImport(Glibc)
import Glibc
#endif
import Synchronization

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

/// What other threads hand an owner thread: items posted under a mutex, a close request, and the wake pipe
/// that interrupts the owner's `poll()`. The owner ``take()``s both at the top of each loop turn and calls
/// ``ownerFinished()`` when its loop has ended, after which posts no longer poke.
public final class OwnerInbox<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        var closing = false
    }

    private let state = Mutex(State())
    private let finished = Atomic<Bool>(false)
    /// The owner polls `wake.readFD` and drains it after a wake-up.
    public let wake: WakePipe

    public init() throws(FileError) {
        wake = try WakePipe()
    }

    public func post(_ item: Item) {
        state.withLock { $0.items.append(item) }
        poke()
    }

    public func requestClose() {
        state.withLock { $0.closing = true }
        poke()
    }

    /// Everything posted since the last call, and whether a close was requested.
    public func take() -> (items: [Item], closing: Bool) {
        state.withLock { box in
            defer { box.items.removeAll() }
            return (box.items, box.closing)
        }
    }

    public func ownerFinished() {
        finished.store(true, ordering: .sequentiallyConsistent)
    }

    private func poke() {
        guard !finished.load(ordering: .sequentiallyConsistent) else { return }
        wake.poke()
    }
}
