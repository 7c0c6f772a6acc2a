public import BotSupport
import CLibWebSockets
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One HTTP request as the listener's handler sees it.
public struct HTTPRequest: Sendable, Equatable {
    /// `GET`, `HEAD`, `POST`, `PUT`, `PATCH`, `DELETE` or `OPTIONS`.
    public var method: String
    /// The path without the query (`/metrics`).
    public var path: String
    /// The raw query after `?` (`a=1&b=2`), empty when there is none.
    public var query: String
    /// Request headers libwebsockets parses by name (Host, Content-Type, Authorization, Cookie, X-Auth-Token,
    /// …), lowercased names in the order lws lists them; headers unknown to lws are not included.
    public var headers: [(name: String, value: String)]
    /// The request body (POST/PUT/PATCH), at most ``LoopbackHTTPServer/Settings/maxBodyBytes``.
    public var body: [UInt8]
    /// The peer's IP address as text (`127.0.0.1`, `::1`), empty when unknown: the audit's "from where".
    public var remoteAddress: String

    public init(
        method: String, path: String, query: String = "", headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        remoteAddress: String = ""
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let name = name.lowercased()
        return headers.first { $0.name == name }?.value
    }

    public static func == (a: HTTPRequest, b: HTTPRequest) -> Bool {
        a.method == b.method && a.path == b.path && a.query == b.query && a.body == b.body && a.remoteAddress == b.remoteAddress
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
    }
}

/// A small HTTP/1.1 server on a loopback address, on libwebsockets' own HTTP server role, for the
/// operator's `/healthz` and `/metrics`.
///
/// Threading (SWIFT-LINUX §4.1, as ``WebSocketRuntime``): one `lws_context` owned by one service thread;
/// every lws call after `start()` happens there. `stop()` from another thread only sets a flag and calls
/// `lws_cancel_service`. The `handler` runs **on the service thread** for each request and must not
/// block (``StatusBoard/response(method:path:)`` only copies a snapshot under a mutex).
///
/// Loopback only: the bind address must be 127.0.0.1, ::1 or localhost — the endpoints carry no
/// authentication, so they are never offered to the network (use a reverse proxy to publish them).
///
/// Hostile local clients (issue 14): WebSocket (and any other) upgrades are refused with 400 and never
/// answered 101; a connection that sends no complete request within ``Settings/idleTimeoutSeconds``, or
/// idles that long between kept-alive requests, is closed by lws; at most ``Settings/maxConnections`` are
/// open at once. Decision for the one over the limit: the **oldest idle** connection (no request in
/// flight) is closed to make room, so a flood of idle sockets can never lock a scraper out; only when every
/// connection is mid-request is the new one refused. Request bodies over ``Settings/maxBodyBytes`` get 413.
public final class LoopbackHTTPServer: @unchecked Sendable {
    public enum Limits {
        /// Body bytes written per WRITEABLE callback: one bounded `lws_write` keeps the loop responsive.
        public static let writeChunkBytes = 16 << 10
        /// Seconds a client may take to send its request, and a kept-alive connection may idle.
        public static let idleTimeoutSeconds: Int32 = 5
        /// Connections open at once. A scraper uses one; 64 leaves room for a few consoles and tools.
        public static let maxConnections = 64
        /// Largest request body read (the health/metrics routes read none; later routes take small forms).
        public static let maxBodyBytes = 64 << 10
        /// Room for the response header block (status line, the listener's headers and a response's own few).
        static let headerBytes = 4096
        /// Longest header value or query copied into an ``HTTPRequest`` (lws's own header limit is lower).
        static let maxHeaderValueBytes = 4096
        /// Streaming responses open at once; one more closes the oldest (a forgotten browser tab must not hold
        /// connections a scraper needs).
        public static let maxStreams = 8
    }

    /// The bounds of one server (tests shorten them; the defaults are ``Limits``).
    public struct Settings: Sendable {
        public var idleTimeoutSeconds: Int32 = Limits.idleTimeoutSeconds
        public var maxConnections: Int = Limits.maxConnections
        public var maxBodyBytes: Int = Limits.maxBodyBytes
        /// Bind any IP address, not only loopback. Only for a caller that authenticates what is not health or
        /// metrics (the bridge sets it when `http_listen` is beyond loopback and the console token exists).
        public var bindBeyondLoopback = false

        public init() {}
    }

    /// What the listener refused or cut, for tests and metrics.
    public struct Counters: Sendable, Equatable {
        /// Requests handed to the handler.
        public var requests = 0
        /// Upgrade requests (WebSocket, h2c) answered 400.
        public var upgradesRefused = 0
        /// Idle connections closed to make room for a new one.
        public var idleEvicted = 0
        /// New connections refused because every open one was mid-request.
        public var connectionsRefused = 0
        /// Requests answered 413 (body too large) or 411 (body without a length).
        public var bodiesRefused = 0
    }

    /// Why the listener could not start.
    public enum StartError: Error, Equatable, Sendable, CustomStringConvertible {
        case notLoopback(host: String)
        case invalidPort(Int)
        /// An `http_listen` value that is not `HOST:PORT` / `[::1]:PORT`.
        case invalidListen(String, reason: String)
        /// Another socket listens on the address and port.
        case addressInUse(host: String, port: Int)
        /// lws could not create the context for another reason.
        case cannotListen(host: String, port: Int, detail: String)
        case thread(code: Int32)

        public var description: String {
            switch self {
            case .notLoopback(let host): "the status listener binds to loopback only (127.0.0.1, ::1, localhost), not \(host)"
            case .invalidPort(let port): "status listener port \(port) is not in 0…65535"
            case .invalidListen(let text, let reason):
                "status listener address '\(text)' is not HOST:PORT (127.0.0.1:9477, [::1]:9477): \(reason)"
            case .addressInUse(let host, let port): "\(host):\(port) is in use (another process listens there)"
            case .cannotListen(let host, let port, let detail): "cannot listen on \(host):\(port) (\(detail))"
            case .thread(let code): "pthread_create failed with \(code)"
            }
        }
    }

    /// A connection's state, service thread only.
    private struct Connection {
        /// Accept order: the smallest idle one is evicted first.
        let sequence: UInt64
        /// A request is being read or answered: never evicted.
        var busy = false
        /// Being closed (evicted): no longer counted.
        var closing = false
    }

    /// A response being written, or a request whose body is still arriving.
    private enum Pending {
        case writing(body: [UInt8], offset: Int)
        case readingBody(HTTPRequest, expected: Int)
        /// A server-sent-events body: written as its producer queues it, until it ends or the client leaves.
        case streaming(HTTPStream, sequence: UInt64)
    }

    public let host: String
    public let requestedPort: Int
    public let settings: Settings
    private let handler: @Sendable (HTTPRequest) -> HTTPResponse
    private let stopping = Atomic<Bool>(false)
    private let contextGone = Mutex(false)
    private let counterBox = Mutex(Counters())
    private let openCount = Atomic<Int>(0)
    private var context: OpaquePointer?
    private var thread = pthread_t()
    private var started = false
    /// The port actually bound (differs from `requestedPort` when that was 0); set by `start()`.
    public private(set) var port = 0
    // C memory lws keeps pointers to for the context's lifetime.
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private var cStrings: [UnsafeMutablePointer<CChar>] = []
    // Service-thread-only state.
    private var pending: [OpaquePointer: Pending] = [:]
    private var connections: [OpaquePointer: Connection] = [:]
    private var nextSequence: UInt64 = 0
    private var loopThreadID: pthread_t?

    /// Splits a listen address as operators write it (`http_listen`): `127.0.0.1:9477`, `localhost:9477`,
    /// `[::1]:9477` (the brackets keep an IPv6 address apart from its port). Loopback is checked by `start()`.
    public static func parseListen(_ text: String) throws(StartError) -> (host: String, port: Int) {
        do {
            let (host, port) = try NetworkURL.hostAndPort(text, allowPortZero: true, requirePort: true)
            return (host, port ?? 0)
        } catch {
            throw .invalidListen(text, reason: error.description)
        }
    }

    /// `host` must be a loopback address; `port` 0 lets the kernel choose (read ``port`` after `start()`).
    public init(host: String, port: Int, settings: Settings = Settings(), handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        self.host = host
        self.requestedPort = port
        self.settings = settings
        self.handler = handler
        protocols = .allocate(capacity: 2)
    }

    /// A server whose routes need only the method and the path (`/healthz`, `/metrics`).
    public convenience init(
        host: String, port: Int, settings: Settings = Settings(),
        responder: @escaping @Sendable (_ method: String, _ path: String) -> HTTPResponse
    ) {
        self.init(host: host, port: port, settings: settings) { request in responder(request.method, request.path) }
    }

    deinit {
        protocols.deallocate()
        for pointer in cStrings { free(pointer) }
    }

    /// What was refused or cut so far.
    public var counters: Counters { counterBox.withLock { $0 } }

    /// Connections open now, evicted ones still closing included.
    public var openConnections: Int { openCount.load(ordering: .relaxed) }

    private func cString(_ text: String) -> UnsafeMutablePointer<CChar> {
        guard let pointer = strdup(text) else { preconditionFailure("strdup: out of memory") }
        cStrings.append(pointer)
        return pointer
    }

    /// A numeric IPv4 or IPv6 address (no host names: a name could resolve to something other than intended).
    public static func isIPLiteral(_ text: String) -> Bool {
        var host = text
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// Whether `listen` (`http_listen`'s `host:port`) is taken by another listener now, as ``start()`` would find it
    /// (`bitchat-bridge doctor`); nil when it does not parse.
    public static func listenInUse(_ listen: String) -> Bool? {
        guard let (host, port) = try? parseListen(listen) else { return nil }
        let address = host == "localhost" ? "127.0.0.1" : host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return inUse(address: address, port: port)
    }

    /// Whether binding `address:port` as lws does (SO_REUSEADDR) fails with EADDRINUSE: someone listens there.
    static func inUse(address: String, port: Int) -> Bool {
        guard port > 0 else { return false }
        let v6 = address.contains(":")
        let fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        func bind<Address>(_ address: Address) -> Int32 {
            var address = address
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
            }
        }
        let bound: Int32
        if v6 {
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = UInt16(port).bigEndian
            guard inet_pton(AF_INET6, address, &socketAddress.sin6_addr) == 1 else { return false }
            bound = bind(socketAddress)
        } else {
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = UInt16(port).bigEndian
            guard inet_pton(AF_INET, address, &socketAddress.sin_addr) == 1 else { return false }
            bound = bind(socketAddress)
        }
        return bound != 0 && errno == EADDRINUSE
    }

    /// Binds, then serves on its own thread until ``stop()``.
    public func start() throws(StartError) {
        precondition(!started, "start() called twice")
        var address: String
        switch host {
        case "127.0.0.1", "localhost": address = "127.0.0.1"
        case "::1", "[::1]": address = "::1"
        default:
            guard settings.bindBeyondLoopback, Self.isIPLiteral(host) else { throw .notLoopback(host: host) }
            address = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        }
        guard (0...65535).contains(requestedPort) else { throw .invalidPort(requestedPort) }
        LWSLog.install()
        protocols[0] = lws_protocols(
            name: cString("http"), callback: httpCallback, per_session_data_size: 0, rx_buffer_size: 0, id: 0,
            user: nil, tx_packet_size: 0)
        protocols[1] = lws_protocols()
        var info = lws_context_creation_info()
        info.port = Int32(requestedPort)
        info.iface = UnsafePointer(cString(address))
        info.protocols = UnsafePointer(protocols)
        info.options = UInt64(LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND)
        if !address.contains(":") { info.options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6) }
        // lws binds every address for a nil interface; "0.0.0.0" and "::" mean exactly that.
        if address == "0.0.0.0" || address == "::" { info.iface = nil }
        info.user = Unmanaged.passUnretained(self).toOpaque()
        // The idle bound at every stage: waiting for a complete request (a header slot held, lws's "ah idle",
        // else 10 s), network round trips, and kept-alive connections between requests.
        info.timeout_secs = UInt32(settings.idleTimeoutSeconds)
        info.timeout_secs_ah_idle = UInt32(settings.idleTimeoutSeconds)
        info.keepalive_timeout = settings.idleTimeoutSeconds
        info.server_string = UnsafePointer(cString("bitchat-bridge"))
        guard let context = lws_create_context(&info) else {
            // lws says only that it failed; the common cause gets its own error (naming the port the operator set).
            if Self.inUse(address: address, port: requestedPort) { throw .addressInUse(host: host, port: requestedPort) }
            throw .cannotListen(host: host, port: requestedPort, detail: "lws_create_context failed" + LWSLog.lastErrorSuffix())
        }
        self.context = context
        if let vhost = lws_get_vhost_by_name(context, "default") {
            port = Int(lws_get_vhost_listen_port(vhost))
        }
        guard port > 0 else {
            lws_context_destroy(context)
            self.context = nil
            throw .cannotListen(host: host, port: requestedPort, detail: "no listening port")
        }
        let box = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { argument in
            guard let argument else { return nil }
            Unmanaged<LoopbackHTTPServer>.fromOpaque(argument).takeRetainedValue().serviceLoop()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<LoopbackHTTPServer>.fromOpaque(box).release()
            lws_context_destroy(context)
            self.context = nil
            throw .thread(code: rc)
        }
        started = true
    }

    /// Wakes the service loop from any thread (a stream has bytes to write).
    private func wakeLoop() {
        contextGone.withLock { gone in
            if !gone, let context { lws_cancel_service(context) }
        }
    }

    /// Closes the listener and every connection, and joins the service thread. Idempotent.
    public func stop() {
        guard started else { return }
        stopping.store(true, ordering: .sequentiallyConsistent)
        contextGone.withLock { gone in
            if !gone, let context { lws_cancel_service(context) }
        }
        if thread != pthread_t() {
            pthread_join(thread, nil)
            thread = pthread_t()
        }
    }

    // MARK: - Service thread

    private func assertOnLoop() {
        if let loopThreadID { precondition(pthread_equal(loopThreadID, pthread_self()) != 0, "lws state touched off its loop") }
    }

    private func serviceLoop() {
        loopThreadID = pthread_self()
        while !stopping.load(ordering: .sequentiallyConsistent) {
            if lws_service(context, 0) < 0 { break }
        }
        contextGone.withLock { $0 = true }
        for state in pending.values {
            if case .streaming(let stream, _) = state { stream.cancel() }
        }
        pending.removeAll()
        lws_context_destroy(context)
        connections.removeAll()
        openCount.store(0, ordering: .relaxed)
    }

    private func count(_ change: (inout Counters) -> Void) {
        counterBox.withLock { change(&$0) }
    }

    private func updateOpenCount() {
        openCount.store(connections.count, ordering: .relaxed)
    }

    fileprivate func handle(
        _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?, _ length: Int
    ) -> Int32 {
        assertOnLoop()
        switch reason {
        case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
            return admitConnection()
        case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
            connections[wsi] = Connection(sequence: nextSequence)
            nextSequence += 1
            updateOpenCount()
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            if connections.removeValue(forKey: wsi) != nil { updateOpenCount() }
            if case .streaming(let stream, _) = pending.removeValue(forKey: wsi) { stream.cancel() }
            return 0
        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            // Never 101: this listener speaks plain HTTP only (`in` names the protocol asked for).
            count { $0.upgradesRefused += 1 }
            connections[wsi]?.busy = true
            _ = lws_return_http_status(wsi, 400, "upgrades are not served here")
            return 1
        case LWS_CALLBACK_HTTP:
            connections[wsi]?.busy = true
            return beginRequest(wsi, path: input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "/")
        case LWS_CALLBACK_HTTP_BODY:
            guard case .readingBody(var request, let expected) = pending[wsi], let input else { return 0 }
            request.body += UnsafeRawBufferPointer(start: input, count: length)
            guard request.body.count <= expected else { return -1 }
            pending[wsi] = .readingBody(request, expected: expected)
            return 0
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            guard case .readingBody(let request, _) = pending[wsi] else { return 0 }
            return respond(wsi, to: request)
        case LWS_CALLBACK_HTTP_WRITEABLE:
            return writeBody(wsi)
        case LWS_CALLBACK_CLOSED_HTTP:
            if case .streaming(let stream, _) = pending.removeValue(forKey: wsi) { stream.cancel() }
            return 0
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            // A producer queued stream bytes (or the loop must re-check `stopping`).
            for (streamWSI, state) in pending {
                if case .streaming(let stream, _) = state, stream.hasWork { lws_callback_on_writable(streamWSI) }
            }
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }

    /// A new TCP connection: room is made by closing the oldest idle connection; refused (non-zero) only
    /// when every open connection is mid-request.
    private func admitConnection() -> Int32 {
        let open = connections.filter { !$0.value.closing }
        guard open.count >= settings.maxConnections else { return 0 }
        guard let oldest = open.filter({ !$0.value.busy }).min(by: { $0.value.sequence < $1.value.sequence })?.key else {
            count { $0.connectionsRefused += 1 }
            return 1
        }
        connections[oldest]?.closing = true
        // Closed by lws on its next pass over timeouts; the entry goes at LWS_CALLBACK_WSI_DESTROY.
        lws_set_timeout(oldest, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC)
        count { $0.idleEvicted += 1 }
        updateOpenCount()
        return 0
    }

    private static let methodTokens: [(lws_token_indexes, String)] = [
        (WSI_TOKEN_GET_URI, "GET"), (WSI_TOKEN_HEAD_URI, "HEAD"), (WSI_TOKEN_POST_URI, "POST"), (WSI_TOKEN_PUT_URI, "PUT"),
        (WSI_TOKEN_PATCH_URI, "PATCH"), (WSI_TOKEN_DELETE_URI, "DELETE"), (WSI_TOKEN_OPTIONS_URI, "OPTIONS"),
    ]

    /// Headers complete: the request is built; a body, when announced, is read before the handler runs.
    private func beginRequest(_ wsi: OpaquePointer, path: String) -> Int32 {
        var method = "OTHER"
        for (token, name) in Self.methodTokens where lws_hdr_total_length(wsi, token) > 0 {
            method = name
            break
        }
        var request = HTTPRequest(
            method: method, path: path, query: queryString(wsi), headers: headers(wsi), remoteAddress: peerAddress(wsi))
        guard ["POST", "PUT", "PATCH"].contains(method) else { return respond(wsi, to: request) }
        let lengthText = request.header("content-length")
        guard let lengthText, let expected = Int(lengthText), expected >= 0 else {
            count { $0.bodiesRefused += 1 }
            return beginResponse(wsi, HTTPResponse(status: 411, json: .object([("error", .string("a body needs Content-Length"))])), sendBody: true)
        }
        guard expected <= settings.maxBodyBytes else {
            count { $0.bodiesRefused += 1 }
            return beginResponse(
                wsi, HTTPResponse(status: 413, json: .object([("error", .string("body over \(settings.maxBodyBytes) bytes"))])), sendBody: true)
        }
        if expected == 0 { return respond(wsi, to: request) }
        request.body.reserveCapacity(expected)
        pending[wsi] = .readingBody(request, expected: expected)
        return 0
    }

    private func respond(_ wsi: OpaquePointer, to request: HTTPRequest) -> Int32 {
        count { $0.requests += 1 }
        return beginResponse(wsi, handler(request), sendBody: request.method != "HEAD")
    }

    private func peerAddress(_ wsi: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        return buffer.withUnsafeMutableBufferPointer { pointer in
            guard let text = lws_get_peer_simple(wsi, pointer.baseAddress, pointer.count) else { return "" }
            return String(cString: text)
        }
    }

    /// The query after `?`, as sent (lws hands it over split at `&`).
    private func queryString(_ wsi: OpaquePointer) -> String {
        var parts: [String] = []
        var index: Int32 = 0
        while lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_URI_ARGS, index) > 0, parts.count < 64 {
            if let part = copyHeader(wsi, WSI_TOKEN_HTTP_URI_ARGS, fragment: index) { parts.append(part) }
            index += 1
        }
        return parts.joined(separator: "&")
    }

    /// The named headers lws parsed (`host:`, `content-type:`, …), without the request-line tokens.
    private func headers(_ wsi: OpaquePointer) -> [(name: String, value: String)] {
        var result: [(name: String, value: String)] = []
        for raw in 0..<_WSI_TOKEN_CLIENT_SENT_PROTOCOLS.rawValue {
            let token = lws_token_indexes(rawValue: raw)
            guard lws_hdr_total_length(wsi, token) > 0, let cName = lws_token_to_string(token) else { continue }
            let name = String(cString: cName)
            guard name.hasSuffix(":"), !name.hasPrefix(":") else { continue }
            if let value = copyHeader(wsi, token, fragment: nil) { result.append((String(name.dropLast()), value)) }
        }
        return result
    }

    private func copyHeader(_ wsi: OpaquePointer, _ token: lws_token_indexes, fragment: Int32?) -> String? {
        var buffer = [CChar](repeating: 0, count: Limits.maxHeaderValueBytes + 1)
        let n = buffer.withUnsafeMutableBufferPointer { pointer in
            if let fragment { return lws_hdr_copy_fragment(wsi, pointer.baseAddress, Int32(pointer.count), token, fragment) }
            return lws_hdr_copy(wsi, pointer.baseAddress, Int32(pointer.count), token)
        }
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func beginResponse(_ wsi: OpaquePointer, _ response: HTTPResponse, sendBody: Bool) -> Int32 {
        let pre = CLibWebSockets_pre()
        var buffer = [UInt8](repeating: 0, count: pre + Limits.headerBytes)
        let failed = buffer.withUnsafeMutableBufferPointer { pointer -> Bool in
            guard let base = pointer.baseAddress else { return true }
            let start = base + pre
            var cursor: UnsafeMutablePointer<UInt8>? = start
            let end = start + Limits.headerBytes - 1
            // A stream has no length: lws then closes the connection when it ends (HTTP/1.1 without chunking).
            let length = response.stream == nil ? lws_filepos_t(response.body.count) : lws_filepos_t.max
            if lws_add_http_common_headers(wsi, UInt32(response.status), response.contentType, length, &cursor, end) != 0 {
                return true
            }
            let noStore = Array("no-store".utf8)
            if lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CACHE_CONTROL, noStore, Int32(noStore.count), &cursor, end)
                != 0
            {
                return true
            }
            for header in response.headers {
                let name = Array((header.name.lowercased() + ":").utf8) + [0]
                let value = Array(header.value.utf8)
                let added = name.withUnsafeBufferPointer { namePointer in
                    lws_add_http_header_by_name(wsi, namePointer.baseAddress, value, Int32(value.count), &cursor, end)
                }
                if added != 0 { return true }
            }
            return lws_finalize_write_http_header(wsi, start, &cursor, end) != 0
        }
        if failed { return -1 }
        if let stream = response.stream, sendBody {
            startStream(wsi, stream)
            return 0
        }
        pending[wsi] = .writing(body: sendBody ? response.body : [], offset: 0)
        lws_callback_on_writable(wsi)
        return 0
    }

    private func startStream(_ wsi: OpaquePointer, _ stream: HTTPStream) {
        let streams = pending.compactMap { entry -> (OpaquePointer, UInt64)? in
            if case .streaming(_, let sequence) = entry.value { return (entry.key, sequence) }
            return nil
        }
        if streams.count >= Limits.maxStreams, let oldest = streams.min(by: { $0.1 < $1.1 }) {
            if case .streaming(let old, _) = pending[oldest.0] { old.finish() }
            lws_callback_on_writable(oldest.0)
        }
        let sequence = connections[wsi]?.sequence ?? nextSequence
        pending[wsi] = .streaming(stream, sequence: sequence)
        // No idle timeout while the stream is open: it is quiet until something happens.
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
        stream.setWake { [weak self] in self?.wakeLoop() }
        lws_callback_on_writable(wsi)
    }

    private func writeStream(_ wsi: OpaquePointer, _ stream: HTTPStream) -> Int32 {
        let (bytes, ended) = stream.take(max: Limits.writeChunkBytes)
        if !bytes.isEmpty {
            let pre = CLibWebSockets_pre()
            var buffer = [UInt8](repeating: 0, count: pre + bytes.count)
            buffer.replaceSubrange(pre..<(pre + bytes.count), with: bytes)
            let written = buffer.withUnsafeMutableBufferPointer { pointer -> Int32 in
                guard let base = pointer.baseAddress else { return -1 }
                return lws_write(wsi, base + pre, bytes.count, LWS_WRITE_HTTP)
            }
            if written < 0 {
                pending.removeValue(forKey: wsi)
                stream.cancel()
                return -1
            }
        }
        if ended {
            pending.removeValue(forKey: wsi)
            stream.cancel()
            return -1
        }
        if stream.hasWork { lws_callback_on_writable(wsi) }
        return 0
    }

    private func writeBody(_ wsi: OpaquePointer) -> Int32 {
        if case .streaming(let stream, _) = pending[wsi] { return writeStream(wsi, stream) }
        guard case .writing(let body, var offset) = pending[wsi] else { return 0 }
        let remaining = body.count - offset
        if remaining > 0 {
            let count = min(remaining, Limits.writeChunkBytes)
            let isLast = count == remaining
            let pre = CLibWebSockets_pre()
            var buffer = [UInt8](repeating: 0, count: pre + count)
            buffer.replaceSubrange(pre..<(pre + count), with: body[offset..<(offset + count)])
            let written = buffer.withUnsafeMutableBufferPointer { pointer -> Int32 in
                guard let base = pointer.baseAddress else { return -1 }
                return lws_write(wsi, base + pre, count, isLast ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP)
            }
            if written < 0 {
                pending.removeValue(forKey: wsi)
                return -1
            }
            offset += count
            if !isLast {
                pending[wsi] = .writing(body: body, offset: offset)
                lws_callback_on_writable(wsi)
                return 0
            }
        }
        pending.removeValue(forKey: wsi)
        connections[wsi]?.busy = false
        // Keep-alive: wait for the next request on this connection, or close if lws says so.
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }
}

private func httpCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else { return 0 }
    return Unmanaged<LoopbackHTTPServer>.fromOpaque(raw).takeUnretainedValue().handle(wsi, reason, user, input, length)
}
