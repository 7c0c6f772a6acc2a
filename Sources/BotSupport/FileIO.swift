#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A file-system failure, keeping the C function name and `errno` text.
public struct FileError: Error, Equatable, Sendable, CustomStringConvertible {
    public let operation: String
    public let path: String
    public let code: Int32

    public init(operation: String, path: String, code: Int32) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    public var isNotFound: Bool { code == ENOENT }
    public var isDiskFull: Bool { code == ENOSPC || code == EDQUOT }

    public var description: String {
        "\(operation) \(path): \(String(cString: strerror(code)))"
    }
}

/// Small, blocking file helpers for start-up and CLI work (never used on an event loop).
public enum FileIO {
    /// Reads a whole file. `maxBytes` bounds what an operator-supplied path can make us load.
    public static func read(_ path: String, maxBytes: Int = 64 << 20) throws(FileError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError(operation: "open", path: path, code: errno) }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(operation: "read", path: path, code: errno)
            }
            if n == 0 { return out }
            out.append(contentsOf: chunk[0..<n])
            guard out.count <= maxBytes else { throw FileError(operation: "read", path: path, code: EFBIG) }
        }
    }

    /// True when something exists at `path`.
    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    /// The permission bits (e.g. 0o600) of `path`.
    public static func permissions(_ path: String) throws(FileError) -> UInt32 {
        var info = stat()
        guard stat(path, &info) == 0 else { throw FileError(operation: "stat", path: path, code: errno) }
        return UInt32(info.st_mode) & 0o7777
    }

    /// Creates `path` (and missing parents) with exactly `mode`; an existing directory is left as it is.
    public static func makeDirectory(_ path: String, mode: UInt32 = 0o700) throws(FileError) {
        var info = stat()
        if stat(path, &info) == 0 {
            guard (UInt32(info.st_mode) & UInt32(S_IFMT)) == UInt32(S_IFDIR) else {
                throw FileError(operation: "mkdir", path: path, code: ENOTDIR)
            }
            return
        }
        let parent = directoryName(of: path)
        if parent != path, !parent.isEmpty, !exists(parent) {
            try makeDirectory(parent, mode: mode)
        }
        if mkdir(path, mode_t(mode)) != 0 {
            if errno == EEXIST { return }
            throw FileError(operation: "mkdir", path: path, code: errno)
        }
        // mkdir's mode passes through the umask, and a set-group-ID parent (seen on a CI file system) hands its
        // bit down: set exactly the mode asked for, so a data directory is 0700 wherever it is made.
        if chmod(path, mode_t(mode)) != 0 { throw FileError(operation: "chmod", path: path, code: errno) }
    }

    /// Writes `bytes` so that readers see either the old file or the whole new one, never a mix:
    /// a temporary file in the same directory (created with `mode`, never wider), fsync, rename, fsync dir.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o600) throws(FileError) {
        let temporary = "\(path).tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode))
        guard fd >= 0 else { throw FileError(operation: "open", path: temporary, code: errno) }
        var failure: FileError?
        if fchmod(fd, mode_t(mode)) != 0 { failure = FileError(operation: "fchmod", path: temporary, code: errno) }
        var written = 0
        while failure == nil, written < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                failure = FileError(operation: "write", path: temporary, code: errno)
            } else {
                written += n
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = FileError(operation: "fsync", path: temporary, code: errno) }
        close(fd)
        if failure == nil, rename(temporary, path) != 0 {
            failure = FileError(operation: "rename", path: path, code: errno)
        }
        if let failure {
            unlink(temporary)
            throw failure
        }
        syncDirectory(of: path)
    }

    /// Everything before the last `/` ("." for a bare name).
    public static func directoryName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// `directory/name`, without doubling the slash.
    public static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    private static func syncDirectory(of path: String) {
        let fd = open(directoryName(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
