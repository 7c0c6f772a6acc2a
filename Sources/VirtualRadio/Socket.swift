#if canImport(Glibc)
import Glibc
#endif

/// Why a socket operation failed; keeps the failing call's name and errno.
public enum RadioError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidAddress(String)
    case system(call: String, errno: Int32)

    public var description: String {
        switch self {
        case .invalidAddress(let text): "invalid address '\(text)' (expected HOST:PORT with an IPv4 host)"
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
        }
    }
}

/// Thin POSIX helpers: IPv4 loopback TCP, non-blocking descriptors, a wake pipe.
enum Socket {
    static func parse(_ text: String) throws(RadioError) -> (host: String, port: UInt16) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            throw .invalidAddress(text)
        }
        let host = String(text[..<colon])
        var probe = in_addr()
        guard inet_pton(AF_INET, host, &probe) == 1 else { throw .invalidAddress(text) }
        return (host, port)
    }

    static func address(host: String, port: UInt16) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        _ = inet_pton(AF_INET, host, &addr.sin_addr)
        return addr
    }

    static func listen(host: String, port: UInt16) throws(RadioError) -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .system(call: "socket", errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = address(host: host, port: port)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw .system(call: "bind", errno: code)
        }
        guard Glibc.listen(fd, 64) == 0 else {
            let code = errno
            close(fd)
            throw .system(call: "listen", errno: code)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        setNonBlocking(fd)
        return (fd, UInt16(bigEndian: actual.sin_port))
    }

    static func connect(host: String, port: UInt16) throws(RadioError) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .system(call: "socket", errno: errno) }
        var addr = address(host: host, port: port)
        let result = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw .system(call: "connect", errno: code)
        }
        configureConnected(fd)
        setNonBlocking(fd)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }

    /// Starts a non-blocking connect: the descriptor and whether it is already connected (loopback often
    /// is); otherwise poll it for POLLOUT and read ``pendingError(_:)``.
    static func startConnect(host: String, port: UInt16) throws(RadioError) -> (fd: Int32, connected: Bool) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .system(call: "socket", errno: errno) }
        setNonBlocking(fd)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var addr = address(host: host, port: port)
        let result = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if result == 0 { return (fd, true) }
        let code = errno
        if code == EINPROGRESS || code == EINTR { return (fd, false) }
        close(fd)
        throw .system(call: "connect", errno: code)
    }

    /// The outcome of a non-blocking connect once the descriptor is writable (0 = connected, else an errno).
    static func pendingError(_ fd: Int32) -> Int32 {
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else { return errno }
        return code
    }

    /// TCP_NODELAY on a connected descriptor (one frame per write; latency matters more than batching).
    static func configureConnected(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    /// A non-blocking pipe used to wake a poll() loop: (read end, write end).
    /// Reads what is available: nil on EOF or a hard error, [] when the read would block.
    static func readAvailable(_ fd: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let n = read(fd, &buffer, buffer.count)
        if n > 0 { return Array(buffer[0..<n]) }
        if n < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return [] }
        return nil
    }

    /// Writes as much of `pending` as the socket takes; false on a hard error.
    static func flush(_ fd: Int32, _ pending: inout [UInt8]) -> Bool {
        while !pending.isEmpty {
            let n = pending.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                pending.removeFirst(n)
            } else if n < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                return true
            } else {
                return false
            }
        }
        return true
    }
}
