public import BotSupport
import CLibWebSockets
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP/1.1 server on a loopback address, on libwebsockets' own HTTP server role, for the
/// operator's `/healthz` and `/metrics`.
///
/// Threading (SWIFT-LINUX §4.1, as ``WebSocketRuntime``): one `lws_context` owned by one service thread;
/// every lws call after `start()` happens there. `stop()` from another thread only sets a flag and calls
/// `lws_cancel_service`. The `responder` runs **on the service thread** for each request and must not
/// block (``StatusBoard/response(method:path:)`` only copies a snapshot under a mutex).
///
/// Loopback only: the bind address must be 127.0.0.1, ::1 or localhost — the endpoints carry no
/// authentication, so they are never offered to the network (use a reverse proxy to publish them).
public final class LoopbackHTTPServer: @unchecked Sendable {
    public enum Limits {
        /// Body bytes written per WRITEABLE callback: one bounded `lws_write` keeps the loop responsive.
        public static let writeChunkBytes = 16 << 10
        /// Seconds a client may take to send its request, and a kept-alive connection may idle.
        public static let idleTimeoutSeconds: Int32 = 5
        /// Room for the response header block (status line + four headers).
        static let headerBytes = 512
    }

    /// Why the listener could not start.
    public enum StartError: Error, Equatable, Sendable, CustomStringConvertible {
        case notLoopback(host: String)
        case invalidPort(Int)
        /// An `http_listen` value that is not `HOST:PORT` / `[::1]:PORT`.
        case invalidListen(String)
        /// lws could not create the context; most often the port is taken.
        case cannotListen(host: String, port: Int, detail: String)
        case thread(code: Int32)

        public var description: String {
            switch self {
            case .notLoopback(let host): "the status listener binds to loopback only (127.0.0.1, ::1, localhost), not \(host)"
            case .invalidPort(let port): "status listener port \(port) is not in 0…65535"
            case .invalidListen(let text): "status listener address '\(text)' is not HOST:PORT (127.0.0.1:9477, [::1]:9477)"
            case .cannotListen(let host, let port, let detail): "cannot listen on \(host):\(port) (\(detail))"
            case .thread(let code): "pthread_create failed with \(code)"
            }
        }
    }

    private struct Pending {
        var body: [UInt8]
        var offset = 0
    }

    public let host: String
    public let requestedPort: Int
    private let responder: @Sendable (_ method: String, _ path: String) -> HTTPResponse
    private let stopping = Atomic<Bool>(false)
    private let contextGone = Mutex(false)
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
    private var loopThreadID: pthread_t?

    /// Splits a listen address as operators write it (`http_listen`): `127.0.0.1:9477`, `localhost:9477`,
    /// `[::1]:9477` (the brackets keep an IPv6 address apart from its port). Loopback is checked by `start()`.
    public static func parseListen(_ text: String) throws(StartError) -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else {
            throw .invalidListen(text)
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") && host.count > 2 {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") || host.contains("[") || host.contains("]") || host.isEmpty {
            throw .invalidListen(text)
        }
        guard (0...65535).contains(port) else { throw .invalidPort(port) }
        return (host, port)
    }

    /// `host` must be a loopback address; `port` 0 lets the kernel choose (read ``port`` after `start()`).
    public init(host: String, port: Int, responder: @escaping @Sendable (_ method: String, _ path: String) -> HTTPResponse) {
        self.host = host
        self.requestedPort = port
        self.responder = responder
        protocols = .allocate(capacity: 2)
    }

    deinit {
        protocols.deallocate()
        for pointer in cStrings { free(pointer) }
    }

    private func cString(_ text: String) -> UnsafeMutablePointer<CChar> {
        guard let pointer = strdup(text) else { preconditionFailure("strdup: out of memory") }
        cStrings.append(pointer)
        return pointer
    }

    /// Binds, then serves on its own thread until ``stop()``.
    public func start() throws(StartError) {
        precondition(!started, "start() called twice")
        let address: String
        switch host {
        case "127.0.0.1", "localhost": address = "127.0.0.1"
        case "::1", "[::1]": address = "::1"
        default: throw .notLoopback(host: host)
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
        if address == "127.0.0.1" { info.options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6) }
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.timeout_secs = UInt32(Limits.idleTimeoutSeconds)
        info.keepalive_timeout = Limits.idleTimeoutSeconds
        info.server_string = UnsafePointer(cString("bitchat-bridge"))
        guard let context = lws_create_context(&info) else {
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
        pending.removeAll()
        lws_context_destroy(context)
    }

    fileprivate func handle(
        _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?, _ length: Int
    ) -> Int32 {
        assertOnLoop()
        switch reason {
        case LWS_CALLBACK_HTTP:
            let path = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "/"
            let method: String
            if lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 {
                method = "GET"
            } else if lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0 {
                method = "HEAD"
            } else if lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0 {
                method = "POST"
            } else {
                method = "OTHER"
            }
            let response = responder(method, path)
            return beginResponse(wsi, response, sendBody: method != "HEAD")
        case LWS_CALLBACK_HTTP_WRITEABLE:
            return writeBody(wsi)
        case LWS_CALLBACK_CLOSED_HTTP:
            pending.removeValue(forKey: wsi)
            return 0
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            return 0  // the loop re-checks `stopping`
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }

    private func beginResponse(_ wsi: OpaquePointer, _ response: HTTPResponse, sendBody: Bool) -> Int32 {
        let pre = CLibWebSockets_pre()
        var buffer = [UInt8](repeating: 0, count: pre + Limits.headerBytes)
        let failed = buffer.withUnsafeMutableBufferPointer { pointer -> Bool in
            guard let base = pointer.baseAddress else { return true }
            let start = base + pre
            var cursor: UnsafeMutablePointer<UInt8>? = start
            let end = start + Limits.headerBytes - 1
            if lws_add_http_common_headers(
                wsi, UInt32(response.status), response.contentType, lws_filepos_t(response.body.count), &cursor, end) != 0
            {
                return true
            }
            let noStore = Array("no-store".utf8)
            if lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CACHE_CONTROL, noStore, Int32(noStore.count), &cursor, end)
                != 0
            {
                return true
            }
            return lws_finalize_write_http_header(wsi, start, &cursor, end) != 0
        }
        if failed { return -1 }
        pending[wsi] = Pending(body: sendBody ? response.body : [])
        lws_callback_on_writable(wsi)
        return 0
    }

    private func writeBody(_ wsi: OpaquePointer) -> Int32 {
        guard var state = pending[wsi] else { return 0 }
        let remaining = state.body.count - state.offset
        if remaining > 0 {
            let count = min(remaining, Limits.writeChunkBytes)
            let isLast = count == remaining
            let pre = CLibWebSockets_pre()
            var buffer = [UInt8](repeating: 0, count: pre + count)
            buffer.replaceSubrange(pre..<(pre + count), with: state.body[state.offset..<(state.offset + count)])
            let written = buffer.withUnsafeMutableBufferPointer { pointer -> Int32 in
                guard let base = pointer.baseAddress else { return -1 }
                return lws_write(wsi, base + pre, count, isLast ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP)
            }
            if written < 0 {
                pending.removeValue(forKey: wsi)
                return -1
            }
            state.offset += count
            if !isLast {
                pending[wsi] = state
                lws_callback_on_writable(wsi)
                return 0
            }
        }
        pending.removeValue(forKey: wsi)
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
