import BotSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One bridge per data directory (issue 23): a running bridge holds an exclusive `flock` on
/// `<data-dir>/bridge.lock` from before it reads its key file until its stop, and writes its PID into the file.
/// A second `run` on the same directory would share the mesh peer ID and the database and, at its stop, remove the
/// first one's control socket; it exits 1 instead, naming the directory and the PID that holds it.
///
/// `flock`, not `fcntl` record locks: a `flock` belongs to the open file, so two bridges of one process (the
/// in-process test world) exclude each other too, and the kernel drops it when the process dies (`kill -9` leaves a
/// stale PID in the file, never a stale lock). The descriptor is close-on-exec: no child inherits the lock.
final class DataDirectoryLock: Sendable {
    static let fileName = "bridge.lock"

    private let descriptor: Atomic<Int32>

    private init(descriptor: Int32) {
        self.descriptor = Atomic(descriptor)
    }

    deinit { release() }

    /// Takes the lock of `dataDirectory` (which must exist) or says who holds it.
    static func acquire(dataDirectory: String) throws(CommandExit) -> DataDirectoryLock {
        let path = FileIO.join(dataDirectory, fileName)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw .failure("cannot open the data directory's lock file \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = String(cString: strerror(errno))
            let holder = busy ? Self.holder(fd) : nil
            close(fd)
            guard busy else { throw .failure("cannot lock \(path): \(reason)") }
            throw .failure(
                "another bridge\(holder.map { " (PID \($0))" } ?? "") is running on the data directory \(dataDirectory) "
                    + "(it holds \(path)); stop it first, or give this one a data directory of its own "
                    + "(--data-dir, data_dir or BRIDGE_DATA_DIR)")
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return DataDirectoryLock(descriptor: fd)
    }

    /// Gives the lock up (the stop, after the database's checkpoint); the file stays, with a PID nobody holds.
    func release() {
        let fd = descriptor.exchange(-1, ordering: .acquiringAndReleasing)
        if fd >= 0 { close(fd) }
    }

    /// Whether another open file holds `dataDirectory`'s lock now (a bridge runs on it), with the PID it wrote; nil when
    /// nobody does (or there is no lock file). Takes and gives back a shared lock; never creates the file.
    static func holder(dataDirectory: String) -> Holder? {
        let fd = open(FileIO.join(dataDirectory, fileName), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard flock(fd, LOCK_SH | LOCK_NB) != 0 else {
            _ = flock(fd, LOCK_UN)
            return nil
        }
        return errno == EWOULDBLOCK ? Holder(pid: holder(fd)) : nil
    }

    /// Who holds a data directory's lock: the PID it wrote into the file, when it reads as one.
    struct Holder {
        let pid: Int32?
    }

    /// The PID the holder wrote into the lock file, if it reads as one.
    private static func holder(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int32(String(decoding: buffer[0..<count].filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }, as: UTF8.self))
    }
}
