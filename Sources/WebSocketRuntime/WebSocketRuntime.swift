public import BotSupport
import CLibWebSockets
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A libwebsockets client context with its own service thread, for many connections at once.
///
/// Threading rule (SWIFT-LINUX §4.1): every lws call happens on the service thread. Other threads only
/// append a command to ``inbox`` and call `lws_cancel_service`, the one thread-safe lws call; the loop
/// drains the inbox on `LWS_CALLBACK_EVENT_WAIT_CANCELLED`. Events go out through `onEvent`, which is
/// called **on the service thread** and must not block.
///
/// Connection lifetime: a connection's `wsi` is valid from `lws_client_connect_via_info` until lws frees
/// it. lws frees a client through several callbacks depending on how far it got — `CLIENT_CONNECTION_ERROR`
/// (refused, TLS), `CLIENT_CLOSED` (after the upgrade), `CLOSED_CLIENT_HTTP` (closed or timed out while
/// waiting for the upgrade answer) — and always ends with `WSI_DESTROY`. Each of them ends the connection
/// (``end(_:_:)`` forgets the `wsi`), so no lws call is ever made on a freed `wsi`. (Not handling
/// `CLOSED_CLIENT_HTTP` was issue 14's crash 2: a relay that never answered the upgrade was freed by lws's
/// handshake timeout, and the pool's later abort called `lws_set_timeout` on the freed `wsi`.)
///
/// DNS: the Debian lws build resolves synchronously inside `lws_client_connect_via_info`, which would
/// stall every connection of the context. We therefore resolve names with `getaddrinfo` on a short-lived
/// helper thread per connection attempt and hand lws the IP as `address` while the name stays the `host`
/// (Host header, SNI and certificate name). IP literals skip the helper.
public final class WebSocketRuntime: @unchecked Sendable {
    public struct Configuration: Sendable {
        /// PEM CA bundle to trust instead of the system store (tests with a self-signed CA).
        public var caFile: String?
        public var userAgent: String
        /// Idle seconds before lws sends a PING on its own (many relays never ping); 0 = never.
        public var pingSeconds: UInt16
        /// Idle seconds without a valid PONG/data before lws drops the connection; 0 = never.
        public var hangupSeconds: UInt16
        /// TCP + TLS + upgrade must finish within this many seconds (lws's connect timeout and its timeout
        /// for the upgrade answer; lws's default for the latter is 5 s).
        public var connectTimeoutSeconds: UInt32
        /// Inbound messages larger than this are discarded while reassembling (iOS WebSocket max 512 KiB).
        public var maxMessageBytes: Int

        public init(
            caFile: String? = nil, userAgent: String = "bitchat-bridge", pingSeconds: UInt16 = 30,
            hangupSeconds: UInt16 = 90, connectTimeoutSeconds: UInt32 = 10, maxMessageBytes: Int = 512 << 10
        ) {
            self.caFile = caFile
            self.userAgent = userAgent
            self.pingSeconds = pingSeconds
            self.hangupSeconds = hangupSeconds
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.maxMessageBytes = maxMessageBytes
        }
    }

    private enum Command {
        case connect(ConnectionID, WebSocketEndpoint, address: String)
        case send(ConnectionID, [UInt8])
        case ping(ConnectionID)
        case reading(ConnectionID, paused: Bool)
        case close(ConnectionID)
        case fail(ConnectionID, WebSocketEndpoint, WebSocketFailure)
        /// (Re)arm the one timer, or cancel it (nil).
        case timer(ContinuousClock.Instant?)
        case stop
    }

    private struct Inbox {
        var commands: [Command] = []
        /// Set by the loop right before it destroys the context; nobody may wake it after that.
        var contextGone = false
    }

    /// Loop-owned state of one connection.
    private final class Connection {
        let id: ConnectionID
        let endpoint: WebSocketEndpoint
        var wsi: OpaquePointer?
        var outbox: [[UInt8]] = []
        var receive: [UInt8] = []
        var discardedBytes = 0
        var closing = false
        /// A PING frame to write at the next WRITEABLE (``WebSocketRuntime/ping(_:)``).
        var pingPending = false
        /// `CLIENT_ESTABLISHED` was seen: the upgrade completed.
        var established = false
        /// The consumer asked to stop reading (``WebSocketRuntime/setReading(_:paused:)``).
        var readingPaused = false
        var peerCloseCode: Int?
        /// The upgrade answer's `Date` (Unix seconds), read while lws still holds the answer's headers.
        var serverDate: Int64?

        init(id: ConnectionID, endpoint: WebSocketEndpoint) {
            self.id = id
            self.endpoint = endpoint
        }
    }

    public let configuration: Configuration
    private let onEvent: @Sendable (WebSocketEvent) -> Void
    private let logger: Logger
    private let inbox = Mutex(Inbox())
    private let nextID = Atomic<Int>(1)
    private var context: OpaquePointer?
    private var thread = pthread_t()
    private var started = false
    // C memory lws keeps pointers to for the context's lifetime.
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
    private let retryTable: UnsafeMutablePointer<UInt32>
    /// The owner's one timer (``scheduleTimer(at:)``), an lws sorted-usec-list entry on the service thread.
    private let timer: UnsafeMutablePointer<CLibWebSockets_sulBox>
    private var cStrings: [UnsafeMutablePointer<CChar>] = []
    // Service-thread-only state.
    private var connections: [Int: Connection] = [:]
    private var stopping = false
    private var loopThreadID: pthread_t?

    /// `onEvent` runs on the service thread.
    public init(configuration: Configuration, logger: Logger, onEvent: @escaping @Sendable (WebSocketEvent) -> Void) {
        self.configuration = configuration
        self.logger = logger
        self.onEvent = onEvent
        protocols = .allocate(capacity: 2)
        retryPolicy = .allocate(capacity: 1)
        retryTable = .allocate(capacity: 1)
        timer = .allocate(capacity: 1)
        timer.initialize(to: CLibWebSockets_sulBox())
        timer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        protocols.deallocate()
        retryPolicy.deallocate()
        retryTable.deallocate()
        timer.deallocate()
        for pointer in cStrings { free(pointer) }
    }

    private func cString(_ text: String) -> UnsafeMutablePointer<CChar> {
        guard let pointer = strdup(text) else { preconditionFailure("strdup: out of memory") }
        cStrings.append(pointer)
        return pointer
    }

    /// Creates the context and starts the service thread.
    public func start() throws(WebSocketError) {
        precondition(!started, "start() called twice")
        LWSLog.install()
        protocols[0] = lws_protocols(
            name: cString("bitchat-bridge"), callback: webSocketCallback, per_session_data_size: 0,
            rx_buffer_size: 0, id: 0, user: nil, tx_packet_size: 0)
        protocols[1] = lws_protocols()
        retryTable.initialize(to: 1000)
        retryPolicy.pointee = lws_retry_bo_t(
            retry_ms_table: UnsafePointer(retryTable), retry_ms_table_count: 1, conceal_count: 0,
            secs_since_valid_ping: configuration.pingSeconds, secs_since_valid_hangup: configuration.hangupSeconds,
            jitter_percent: 0)
        var info = lws_context_creation_info()
        info.port = CLibWebSockets_portNoListen()
        info.protocols = UnsafePointer(protocols)
        info.options = UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
        if let caFile = configuration.caFile { info.client_ssl_ca_filepath = UnsafePointer(cString(caFile)) }
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.connect_timeout_secs = configuration.connectTimeoutSeconds
        info.timeout_secs = configuration.connectTimeoutSeconds
        guard let context = lws_create_context(&info) else { throw .lws(function: "lws_create_context") }
        self.context = context
        let box = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { argument in
            guard let argument else { return nil }
            Unmanaged<WebSocketRuntime>.fromOpaque(argument).takeRetainedValue().serviceLoop()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<WebSocketRuntime>.fromOpaque(box).release()
            lws_context_destroy(context)
            self.context = nil
            throw .thread(function: "pthread_create", code: rc)
        }
        started = true
    }

    /// Stops every connection (close frames where open) and joins the service thread. Idempotent.
    public func shutdown() {
        guard started else { return }
        enqueue(.stop)
        if thread != pthread_t() {
            pthread_join(thread, nil)
            thread = pthread_t()
        }
    }

    /// Starts a connection to `endpoint` (name resolved off the loop). Reports `.opened` or `.ended`.
    public func open(_ endpoint: WebSocketEndpoint) -> ConnectionID {
        let id = ConnectionID(raw: nextID.wrappingAdd(1, ordering: .relaxed).oldValue)
        if Self.isIPLiteral(endpoint.host) {
            enqueue(.connect(id, endpoint, address: endpoint.host))
        } else {
            Resolver.resolve(endpoint.host) { [self] result in
                switch result {
                case .success(let address): enqueue(.connect(id, endpoint, address: address))
                case .failure(let message): enqueue(.fail(id, endpoint, .dns(message)))
                }
            }
        }
        return id
    }

    /// Queues one text message; sent in order once the connection is open.
    public func send(_ id: ConnectionID, text: String) { enqueue(.send(id, Array(text.utf8))) }

    /// Sends a PING once the connection is open; the answer arrives as `.pong`. A cheap liveness probe: no
    /// relay-side work, and every WebSocket server must answer it (RFC 6455 §5.5.2).
    public func ping(_ id: ConnectionID) { enqueue(.ping(id)) }

    /// Stops (or resumes) reading from a connection: back-pressure for a consumer that is behind. While
    /// paused, lws leaves the socket unread, the kernel's buffers fill and TCP slows the sender down; no
    /// frame is lost. (PONGs are not read either, so a consumer must not stay paused for long.)
    public func setReading(_ id: ConnectionID, paused: Bool) { enqueue(.reading(id, paused: paused)) }

    /// Closes (or aborts, if still connecting) a connection; `.ended(.closedLocally)` follows.
    public func close(_ id: ConnectionID) { enqueue(.close(id)) }

    /// Arms the runtime's one timer for `deadline` (nil cancels it): `.timer` is reported on the service thread
    /// once it passes, so an owner runs on its next deadline with no thread of its own and no tick. Each call
    /// replaces the previous deadline.
    public func scheduleTimer(at deadline: ContinuousClock.Instant?) { enqueue(.timer(deadline)) }

    private func enqueue(_ command: Command) {
        inbox.withLock { inbox in
            guard !inbox.contextGone, let context else { return }
            inbox.commands.append(command)
            lws_cancel_service(context)
        }
    }

    private static func isIPLiteral(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    // MARK: - Service thread

    private func assertOnLoop() {
        if let loopThreadID { precondition(pthread_equal(loopThreadID, pthread_self()) != 0, "lws state touched off its loop") }
    }

    private func serviceLoop() {
        loopThreadID = pthread_self()
        while true {
            if stopping && connections.isEmpty { break }
            if lws_service(context, 0) < 0 { break }
        }
        inbox.withLock { $0.contextGone = true }
        // Anything still listed was killed with the context.
        for connection in connections.values { onEvent(.ended(connection.id, .closedLocally)) }
        connections.removeAll()
        lws_context_destroy(context)
        LWSLog.forgetThread()
    }

    private func drainInbox() {
        assertOnLoop()
        let commands = inbox.withLock { inbox in
            let commands = inbox.commands
            inbox.commands.removeAll(keepingCapacity: true)
            return commands
        }
        for command in commands {
            switch command {
            case .connect(let id, let endpoint, let address):
                if stopping {
                    onEvent(.ended(id, .closedLocally))
                } else {
                    connect(Connection(id: id, endpoint: endpoint), address: address)
                }
            case .fail(let id, _, let failure):
                onEvent(.ended(id, failure))
            case .send(let id, let bytes):
                guard let connection = connections[id.raw] else { continue }
                connection.outbox.append(bytes)
                if let wsi = connection.wsi { lws_callback_on_writable(wsi) }
            case .ping(let id):
                guard let connection = connections[id.raw] else { continue }
                connection.pingPending = true
                if let wsi = connection.wsi, connection.established { lws_callback_on_writable(wsi) }
            case .reading(let id, let paused):
                guard let connection = connections[id.raw], connection.readingPaused != paused else { continue }
                connection.readingPaused = paused
                if let wsi = connection.wsi, connection.established { lws_rx_flow_control(wsi, paused ? 0 : 1) }
            case .close(let id):
                guard let connection = connections[id.raw] else { continue }
                beginClose(connection)
            case .timer(let deadline):
                guard let deadline else {
                    lws_sul_schedule(context, 0, &timer.pointee.sul, nil, LWS_SET_TIMER_USEC_CANCEL)
                    continue
                }
                let (seconds, attoseconds) = (deadline - .now).components
                let micros = max(0, seconds * 1_000_000 + attoseconds / 1_000_000_000_000)
                lws_sul_schedule(context, 0, &timer.pointee.sul, runtimeTimerFired, lws_usec_t(micros))
            case .stop:
                stopping = true
                lws_sul_schedule(context, 0, &timer.pointee.sul, nil, LWS_SET_TIMER_USEC_CANCEL)
                for connection in connections.values { beginClose(connection) }
            }
        }
    }

    /// Called on the loop while draining the inbox (the wsi being serviced is the cancel pipe's, never a
    /// client's), so a client that has not upgraded yet can be freed at once.
    private func beginClose(_ connection: Connection) {
        connection.closing = true
        guard let wsi = connection.wsi else { return }
        guard connection.established else {
            // Nothing to say goodbye to: free it now. A timeout set on a client still waiting for the upgrade
            // answer did not fire (lws 4.1.6): a relay that never answered held SIGTERM for the whole 5 s stop
            // deadline and the bridge exited 1 (issue 14, `HostileRunTests`). lws ends it through
            // CLOSED_CLIENT_HTTP or CLIENT_CONNECTION_ERROR and WSI_DESTROY, each of which calls ``end(_:_:)``.
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC)
            return
        }
        lws_callback_on_writable(wsi)  // sends the close frame
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, 1)  // and kills it within 1 s regardless
    }

    private func connect(_ connection: Connection, address: String) {
        connections[connection.id.raw] = connection
        var info = lws_client_connect_info()
        info.context = context
        info.port = connection.endpoint.port
        info.ssl_connection = connection.endpoint.isTLS ? Int32(LCCSCF_USE_SSL.rawValue) : 0
        info.local_protocol_name = UnsafePointer(protocols[0].name)
        info.protocol = nil  // no Sec-WebSocket-Protocol: relays fail unknown subprotocols
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: connection.id.raw)
        let endpoint = connection.endpoint
        let wsi = address.withCString { address in
            endpoint.path.withCString { path in
                endpoint.host.withCString { host in
                    info.address = address
                    info.path = path
                    info.host = host
                    info.origin = host
                    return lws_client_connect_via_info(&info)
                }
            }
        }
        guard let wsi else {
            // lws 4.1 suppresses CONNECTION_ERROR for failures inside the call (TLS setup, …).
            end(connection, .connect("lws_client_connect_via_info failed" + LWSLog.lastErrorSuffix()))
            return
        }
        if connections[connection.id.raw] != nil { connection.wsi = wsi }
    }

    /// OpenSSL's verdict on the peer certificate ("self-signed certificate", "hostname mismatch", …), or nil
    /// when verification did not fail (or there is no TLS). Read from the SSL object itself because lws
    /// 4.1's own log line is unreliable when several contexts exist: each context creation re-allocates
    /// lws's global SSL ex-data index, and a handshake started before that logs "can't get wsi from ssl
    /// privdata" instead of the reason (the certificate is still refused).
    private static func certificateProblem(_ wsi: OpaquePointer) -> String? {
        guard let ssl = lws_get_ssl(wsi) else { return nil }
        let result = SSL_get_verify_result(ssl)
        // X509_V_ERR_UNSPECIFIED is OpenSSL's value before any verdict: a handshake that ended before the certificate
        // was checked (the peer reset it under load) is a connect failure, not a certificate problem.
        guard result != X509_V_OK, result != X509_V_ERR_UNSPECIFIED, let text = X509_verify_cert_error_string(result) else { return nil }
        return String(cString: text)
    }

    /// One header of the server's upgrade answer (readable in `CLIENT_FILTER_PRE_ESTABLISH`), nil when absent.
    private static func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let length = Int(lws_hdr_total_length(wsi, token))
        guard length > 0, length < 256 else { return nil }
        var buffer = [CChar](repeating: 0, count: length + 1)
        let copied = buffer.withUnsafeMutableBufferPointer { lws_hdr_copy(wsi, $0.baseAddress, Int32($0.count), token) }
        guard copied > 0 else { return nil }
        return String(decoding: buffer.prefix(Int(copied)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    fileprivate func timerFired() {
        assertOnLoop()
        if !stopping { onEvent(.timer) }
    }

    private func end(_ connection: Connection, _ failure: WebSocketFailure) {
        guard connections.removeValue(forKey: connection.id.raw) != nil else { return }
        connection.wsi = nil
        onEvent(.ended(connection.id, failure))
    }

    /// A piece of a message: kept up to the size limit (past it, counted and dropped whole); a whole text message
    /// goes to the owner.
    private func receive(_ connection: Connection, _ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) {
        if let input, length > 0 {
            if connection.discardedBytes > 0 || connection.receive.count + length > configuration.maxMessageBytes {
                connection.discardedBytes += connection.receive.count + length
                connection.receive.removeAll()
            } else {
                connection.receive.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
            }
        }
        if lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0 {
            if connection.discardedBytes > 0 {
                onEvent(.oversizedMessage(connection.id, bytes: connection.discardedBytes))
                connection.discardedBytes = 0
            } else if lws_frame_is_binary(wsi) == 0 {
                // Hand the buffer over and start a fresh one: keeping its capacity would make every later
                // frame copy-on-write a buffer as large as the largest frame seen so far.
                let message = connection.receive
                connection.receive = []
                onEvent(.text(connection.id, message))
            } else {
                connection.receive = []  // Nostr is text only.
            }
        }
    }

    /// The connection may write: the close, a pending PING, or the next queued message (-1 closes the connection).
    private func writable(_ connection: Connection, _ wsi: OpaquePointer) -> Int32 {
        if connection.closing {
            lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, nil, 0)
            return -1
        }
        if connection.pingPending {
            connection.pingPending = false
            // An empty PING: LWS_PRE header room and no payload (a spare byte so the pointer stays inside).
            let pre = CLibWebSockets_pre()
            var frame = [UInt8](repeating: 0, count: pre + 1)
            let written = frame.withUnsafeMutableBufferPointer { pointer -> Int32 in
                guard let base = pointer.baseAddress else { return -1 }
                return lws_write(wsi, base + pre, 0, LWS_WRITE_PING)
            }
            if written < 0 { return -1 }
            if !connection.outbox.isEmpty { lws_callback_on_writable(wsi) }
            return 0
        }
        guard !connection.outbox.isEmpty else { return 0 }
        let message = connection.outbox.removeFirst()
        let pre = CLibWebSockets_pre()
        var buffer = [UInt8](repeating: 0, count: pre + message.count)
        buffer.replaceSubrange(pre..<buffer.count, with: message)
        let written = buffer.withUnsafeMutableBufferPointer { pointer -> Int32 in
            guard let base = pointer.baseAddress else { return -1 }
            return lws_write(wsi, base + pre, message.count, LWS_WRITE_TEXT)
        }
        if written < 0 { return -1 }
        if !connection.outbox.isEmpty { lws_callback_on_writable(wsi) }
        return 0
    }

    fileprivate func handle(
        _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ length: Int
    ) -> Int32 {
        if reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED {
            drainInbox()
            return 0
        }
        guard let wsi, let raw = lws_get_opaque_user_data(wsi), let connection = connections[Int(bitPattern: raw)]
        else { return 0 }
        switch reason {
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            connection.wsi = wsi
            connection.established = true
            if connection.closing {
                lws_callback_on_writable(wsi)
            } else {
                onEvent(.opened(connection.id, serverDate: connection.serverDate))
                if connection.readingPaused { lws_rx_flow_control(wsi, 0) }
                if !connection.outbox.isEmpty || connection.pingPending { lws_callback_on_writable(wsi) }
            }
        case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
            // The answer's headers are readable here, not after the upgrade.
            connection.serverDate = Self.header(wsi, WSI_TOKEN_HTTP_DATE).flatMap(HTTPDate.parse)
        case LWS_CALLBACK_CLIENT_RECEIVE:
            receive(connection, wsi, input, length)
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            return writable(connection, wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            if let input, length >= 2 {
                let bytes = input.assumingMemoryBound(to: UInt8.self)
                connection.peerCloseCode = Int(bytes[0]) << 8 | Int(bytes[1])
            }
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let detail = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection error"
            let reason = Self.certificateProblem(wsi).map { " (certificate: \($0))" }
            let suffix = LWSLog.lastErrorSuffix()  // consumed either way
            end(connection, connection.closing ? .closedLocally : .connect(detail + (reason ?? suffix)))
        case LWS_CALLBACK_CLIENT_RECEIVE_PONG:
            onEvent(.pong(connection.id))
        case LWS_CALLBACK_CLIENT_CLOSED:
            end(connection, connection.closing ? .closedLocally : .closed(code: connection.peerCloseCode))
        case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
            // Closed (by the server, or by lws's timeout for the upgrade answer) before the upgrade.
            let suffix = LWSLog.lastErrorSuffix()
            end(connection, connection.closing ? .closedLocally : .connect("closed before the WebSocket upgrade" + suffix))
        case LWS_CALLBACK_WSI_DESTROY:
            // The last word on every wsi; normally one of the callbacks above has ended it already.
            let failure: WebSocketFailure
            if connection.closing {
                failure = .closedLocally
            } else if connection.established {
                failure = .closed(code: connection.peerCloseCode)
            } else {
                failure = .connect("connection freed before the WebSocket upgrade" + LWSLog.lastErrorSuffix())
            }
            end(connection, failure)
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            guard let input else { break }
            let cursorPointer = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
            guard let cursor = cursorPointer.pointee else { break }
            let value = Array(configuration.userAgent.utf8)
            if lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_USER_AGENT, value, Int32(value.count), cursorPointer,
                                            cursor + length) != 0 {
                return -1
            }
        default:
            break
        }
        return 0
    }
}

/// The runtime's timer passed (on the service thread): the owner hears `.timer`.
private func runtimeTimerFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul else { return }
    let box = UnsafeMutableRawPointer(sul).assumingMemoryBound(to: CLibWebSockets_sulBox.self)
    guard let owner = box.pointee.owner else { return }
    Unmanaged<WebSocketRuntime>.fromOpaque(owner).takeUnretainedValue().timerFired()
}

private func webSocketCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else { return 0 }
    return Unmanaged<WebSocketRuntime>.fromOpaque(raw).takeUnretainedValue().handle(wsi, reason, input, length)
}

/// Routes lws's own log (the only place real TLS reasons appear, SWIFT-LINUX §4.5) into memory, so the
/// next connection error can carry the last error line.
///
/// lws 4.1's log hook is process-wide and its lines name no connection, but lws logs synchronously on
/// the service thread that hit the error, and the connection error is reported on that same thread right
/// after. So the last line is kept **per thread**: a failure in one runtime never picks up another
/// runtime's line (several pools, or parallel tests, in one process).
enum LWSLog {
    private static let state = Mutex<(installed: Bool, lastError: [pthread_t: String])>((false, [:]))

    static func install() {
        let first = state.withLock { state -> Bool in
            defer { state.installed = true }
            return !state.installed
        }
        if first { lws_set_log_level(LLL_ERR | LLL_WARN, lwsLogEmit) }
    }

    static func record(_ line: String) { state.withLock { $0.lastError[pthread_self()] = line } }

    /// `" (lws: <last error line on this thread>)"` once, then cleared.
    static func lastErrorSuffix() -> String {
        guard let line = state.withLock({ $0.lastError.removeValue(forKey: pthread_self()) }) else { return "" }
        return " (lws: \(line.trimmingSuffix()))"
    }

    /// Forgets this thread's line (a service thread that is ending).
    static func forgetThread() { _ = state.withLock { $0.lastError.removeValue(forKey: pthread_self()) } }
}

private func lwsLogEmit(_ level: Int32, _ line: UnsafePointer<CChar>?) {
    guard let line, level & LLL_ERR != 0 else { return }
    LWSLog.record(String(cString: line))
}

extension String {
    fileprivate func trimmingSuffix() -> String {
        var text = Substring(self)
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        return String(text)
    }
}

/// `getaddrinfo` on a short-lived helper thread, so a slow resolver never stalls the lws loop.
enum Resolver {
    enum Outcome { case success(String), failure(String) }

    final class Job {
        let host: String
        let completion: (Outcome) -> Void
        init(host: String, completion: @escaping (Outcome) -> Void) {
            self.host = host
            self.completion = completion
        }
    }

    static func resolve(_ host: String, completion: @escaping (Outcome) -> Void) {
        let box = Unmanaged.passRetained(Job(host: host, completion: completion)).toOpaque()
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let rc = pthread_create(&thread, &attributes, { argument in
            guard let argument else { return nil }
            let job = Unmanaged<Job>.fromOpaque(argument).takeRetainedValue()
            job.completion(Resolver.lookup(job.host))
            return nil
        }, box)
        pthread_attr_destroy(&attributes)
        if rc != 0 {
            Unmanaged<Job>.fromOpaque(box).release()
            completion(.failure("pthread_create failed with \(rc)"))
        }
    }

    static func lookup(_ host: String) -> Outcome {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &result)
        guard rc == 0, let first = result else { return .failure(String(cString: gai_strerror(rc))) }
        defer { freeaddrinfo(result) }
        // Prefer IPv4 (relays' AAAA records are often unreachable from containers), else the first.
        var chosen = first
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if entry.pointee.ai_family == AF_INET { chosen = entry; break }
            cursor = entry.pointee.ai_next
        }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = chosen.pointee.ai_family
        guard let address = chosen.pointee.ai_addr else { return .failure("no address") }
        let ok: Bool
        if family == AF_INET {
            ok = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                var inAddr = v4.pointee.sin_addr
                return inet_ntop(AF_INET, &inAddr, &buffer, socklen_t(buffer.count)) != nil
            }
        } else {
            ok = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                var inAddr = v6.pointee.sin6_addr
                return inet_ntop(AF_INET6, &inAddr, &buffer, socklen_t(buffer.count)) != nil
            }
        }
        guard ok else { return .failure("inet_ntop failed") }
        return .success(buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }
}
