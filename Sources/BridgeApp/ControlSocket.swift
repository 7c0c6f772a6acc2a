public import BotSupport
public import BridgeCore
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The local control socket `bitchat-bridge run` serves at `<data-dir>/control.sock` (issue 17 part 5): a Unix
/// domain stream socket, mode 0600, no network. One JSON object a line in, one JSON line out, then the
/// connection closes. The accept loop and each connection run on their own threads (blocking calls stay off
/// the cooperative pool); the handler runs in a task owned by ``requests``, awaited by the connection's thread
/// until its deadline, cancelled past it, and cancelled and awaited at ``stop()``.
public final class ControlSocket: Sendable {
    enum Limits {
        /// A request is one short notice (512 bytes of text on the wire) plus its options: 64 KiB is generous,
        /// and bounds what one client can make the bridge buffer.
        static let maxRequestBytes = 64 << 10
        /// At most 4 clients at once: an operator's shell, a script; more is a runaway loop.
        static let maxConnections = 4
        /// A connection gets 5 s for its request and the answer; a stalled client does not hold a slot.
        static let connectionMs: Int32 = 5_000
        /// How long ``ControlSocket/stop()`` waits for the accept thread to notice (it is woken at once).
        static let stopWaitMs = 1_000
    }

    enum OpenError: Error, CustomStringConvertible {
        case pathTooLong(String)
        case notOurSocket(String)
        case system(String, String)

        var description: String {
            switch self {
            case .pathTooLong(let path): "control socket path \(path) is longer than a Unix socket address holds"
            case .notOurSocket(let path): "\(path) exists and is not a socket of this user; not replacing it"
            case .system(let call, let message): "\(call): \(message)"
            }
        }
    }

    let path: String
    /// The socket file this bridge bound (device, inode): the stop removes that file and nothing else, so a
    /// process never removes the socket of another bridge that replaced it.
    private let file: (device: UInt64, inode: UInt64)
    private let fd: Int32
    private let logger: Logger
    private let handler: @Sendable (JSONValue) async -> JSONValue
    private let stopping = Atomic<Bool>(false)
    private let active = Atomic<Int>(0)
    private let stopped = DispatchSemaphore(value: 0)
    private let requests = AwaitedTasks()
    /// Wakes the accept thread at ``stop()``: it sleeps in `poll()` on the socket and this, nothing else.
    private let wake: WakePipe

    /// Binds and listens at `path`. A stale socket of this user there is removed first; anything else there
    /// (a file, a directory, another user's socket) is refused.
    init(path: String, logger: Logger, handler: @escaping @Sendable (JSONValue) async -> JSONValue) throws(OpenError) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw .pathTooLong(path) }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFSOCK, info.st_uid == getuid() else { throw .notOurSocket(path) }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system("socket", Self.lastError()) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
            raw[bytes.count] = 0
        }
        // Created 0600 from the start: the umask covers the window between bind and chmod.
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard bound == 0 else {
            let message = Self.lastError()
            close(fd)
            throw .system("bind \(path)", message)
        }
        chmod(path, 0o600)
        guard lstat(path, &info) == 0 else {
            let message = Self.lastError()
            close(fd)
            throw .system("lstat \(path)", message)
        }
        guard listen(fd, Int32(Limits.maxConnections)) == 0 else {
            let message = Self.lastError()
            close(fd)
            unlink(path)
            throw .system("listen", message)
        }
        do {
            wake = try WakePipe()
        } catch {
            close(fd)
            unlink(path)
            throw .system("pipe", error.description)
        }
        self.path = path
        self.file = (UInt64(info.st_dev), UInt64(info.st_ino))
        self.fd = fd
        self.logger = logger
        self.handler = handler
    }

    static func lastError() -> String { String(cString: strerror(errno)) }

    /// Starts the accept thread; logs where the CLI (`notice`, `identities`) reaches this bridge.
    func start() {
        Self.spawn { [self] in acceptLoop() }
        logger.info("control socket listening", [("path", .string(path))])
    }

    /// Stops accepting (the accept thread is woken), waits for the accept thread, removes the socket file, then
    /// cancels and awaits the requests still in the bridge (their connections answer that it did not answer).
    func stop() async {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        wake.poke()
        _ = stopped.wait(timeout: .now() + .milliseconds(Limits.stopWaitMs))
        removeOwnFile()
        await requests.stop()
    }

    /// Removes the socket file if it is still the one this bridge bound.
    private func removeOwnFile() {
        var info = stat()
        guard lstat(path, &info) == 0, UInt64(info.st_dev) == file.device, UInt64(info.st_ino) == file.inode else { return }
        unlink(path)
    }

    private func acceptLoop() {
        defer {
            close(fd)
            stopped.signal()
        }
        while !stopping.load(ordering: .acquiring) {
            var pollers = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.readFD, events: Int16(POLLIN), revents: 0)]
            guard poll(&pollers, 2, -1) > 0, pollers[0].revents & Int16(POLLIN) != 0 else { continue }
            let client = accept(fd, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            guard active.add(1, ordering: .acquiringAndReleasing).newValue <= Limits.maxConnections else {
                active.subtract(1, ordering: .acquiringAndReleasing)
                logger.warning("control connection refused: too many at once", [("limit", .integer(Int64(Limits.maxConnections)))])
                Self.send(client, Self.failure("busy: \(Limits.maxConnections) control connections already open"))
                close(client)
                continue
            }
            Self.spawn { [self] in
                serve(client)
                close(client)
                active.subtract(1, ordering: .acquiringAndReleasing)
            }
        }
    }

    private func serve(_ client: Int32) {
        let deadline = DispatchTime.now() + .milliseconds(Int(Limits.connectionMs))
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !buffer.contains(UInt8(ascii: "\n")) {
            guard buffer.count <= Limits.maxRequestBytes else {
                logger.warning("control request refused: too long", [("limit.bytes", .integer(Int64(Limits.maxRequestBytes)))])
                Self.send(client, Self.failure("request longer than \(Limits.maxRequestBytes) bytes"))
                return
            }
            let left = Int32(clamping: max(0, Int64(deadline.uptimeNanoseconds) - Int64(DispatchTime.now().uptimeNanoseconds)) / 1_000_000)
            var poller = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard left > 0, poll(&poller, 1, left) > 0 else {
                logger.warning("control connection timed out", [("limit.ms", .integer(Int64(Limits.connectionMs)))])
                return
            }
            let count = chunk.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            buffer += chunk[0..<count]
        }
        let line = Array(buffer.prefix { $0 != UInt8(ascii: "\n") })
        let request: JSONValue
        do {
            request = try JSONParser(limits: .init(maxBytes: Limits.maxRequestBytes, maxDepth: 8)).parse(line)
        } catch {
            logger.info("control request", [("op", .string("?")), ("error", .string("\(error)"))])
            Self.send(client, Self.failure("not JSON: \(error)"))
            return
        }
        let left = max(0, Int64(deadline.uptimeNanoseconds) - Int64(DispatchTime.now().uptimeNanoseconds))
        guard let value = requests.run(timeout: .nanoseconds(left), { [handler] in await handler(request) }) else {
            logger.warning("control request timed out in the bridge", [("limit.ms", .integer(Int64(Limits.connectionMs)))])
            Self.send(client, Self.failure("the bridge did not answer within \(Limits.connectionMs) ms"))
            return
        }
        Self.send(client, value)
    }

    static func failure(_ message: String) -> JSONValue {
        .object([("ok", .bool(false)), ("error", .string(message))])
    }

    static func send(_ client: Int32, _ value: JSONValue) {
        let bytes = Array((JSONWriter.compact(value) + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { return }
            offset += written
        }
    }

    /// Why a request to a running bridge got no answer.
    public enum RequestError: Error, CustomStringConvertible {
        case noBridge(String)
        case failed(String)

        public var description: String {
            switch self {
            case .noBridge(let detail): "no bridge is running on this data directory (\(detail)); start it, or pass the --data-dir it runs on"
            case .failed(let detail): detail
            }
        }
    }

    /// One request to the bridge running on `dataDirectory` (its `control.sock`); the answer, or why there is
    /// none (`ok:false` answers carry their error).
    public static func request(_ request: JSONValue, dataDirectory: String) throws(RequestError) -> JSONValue {
        let path = FileIO.join(dataDirectory, "control.sock")
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw .failed("socket path too long: \(path)") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .failed("socket: \(lastError())") }
        defer { close(fd) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw .noBridge("cannot connect to \(path): \(lastError())") }
        send(fd, request)
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !buffer.contains(UInt8(ascii: "\n")), buffer.count <= Limits.maxRequestBytes * 16 {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Limits.connectionMs + 1_000) > 0 else { throw .failed("the bridge did not answer") }
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            buffer += chunk[0..<count]
        }
        let answer: JSONValue
        do {
            answer = try JSONParser().parse(Array(buffer.prefix { $0 != UInt8(ascii: "\n") }))
        } catch {
            throw .failed("the bridge's answer is not JSON: \(error)")
        }
        guard answer["ok"]?.boolValue == true else { throw .failed(answer["error"]?.stringValue ?? "the bridge refused the request") }
        return answer
    }

    /// The PID of the bridge running on `dataDirectory`, nil when none answers on its control socket.
    public static func runningBridge(dataDirectory: String) -> Int64? {
        (try? request(.object([("op", .string("ping"))]), dataDirectory: dataDirectory))?["pid"]?.integerValue
    }

    /// Tells the bridge running on `dataDirectory`, if any, that this process changed its stores (the CLI's
    /// `identities` edits): it reads the block list and pins again at once. Whether a bridge answered (none running:
    /// nothing to tell).
    /// `site`: the moderator's action the change was, made a site record by a bridge that holds the operator key.
    @discardableResult
    public static func notifyStoresChanged(dataDirectory: String, site: (target: SiteTarget, on: Bool, by: String)? = nil) -> Bool {
        var message: [(String, JSONValue)] = [("op", .string("stores.changed"))]
        if let site {
            message.append(("site", .object([("target", .string(site.target.description)), ("on", .bool(site.on)), ("by", .string(site.by))])))
        }
        return (try? request(.object(message), dataDirectory: dataDirectory)) != nil
    }

    /// A detached thread running `body` (BotSupport's ``OwnerThread``); on the calling thread when none can
    /// be created.
    private static func spawn(_ body: @escaping @Sendable () -> Void) {
        if !OwnerThread.detach(body) { body() }
    }
}
