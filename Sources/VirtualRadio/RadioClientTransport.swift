public import BotSupport
public import Mesh
public import MeshRuntime
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A ``MeshTransport`` over one or more virtual-radio hubs: each TCP connection is one link.
///
/// Threading: one owner thread runs poll() over the sockets and a wake pipe, and owns the sockets and their
/// buffers. ``send(_:on:)`` and ``close()`` only enqueue under a mutex and wake the loop. Inbound frames
/// leave through ``events`` (``MeshInbound``: a budget per link, drops counted by reason and link).
///
/// A lost hub connection does not end the transport: the loss is logged, the link goes down, and the loop
/// reconnects with jittered exponential backoff (``Limits/reconnectBaseMs`` … ``Limits/reconnectMaxMs``)
/// until it succeeds or ``close()`` is called; the same link ID comes up again. ``status`` is down while any
/// hub connection is missing. `events` finishes only after ``close()``.
public final class RadioClientTransport: MeshTransport, @unchecked Sendable {
    public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: UInt16
        /// The link's frame limit: must match the hub's `--mtu` (the framing carries no MTU negotiation).
        public var mtu: Int

        public init(host: String, port: UInt16, mtu: Int = 512) {
            self.host = host
            self.port = port
            self.mtu = mtu
        }

        /// Parses `tcp://HOST:PORT[?mtu=N]`.
        public init(url: String) throws(RadioError) {
            guard url.hasPrefix("tcp://") else { throw .invalidAddress(url) }
            var rest = String(url.dropFirst("tcp://".count))
            var mtu = 512
            if let query = rest.firstIndex(of: "?") {
                let parameters = rest[rest.index(after: query)...]
                rest = String(rest[..<query])
                for pair in parameters.split(separator: "&") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    guard parts.count == 2, parts[0] == "mtu", let value = Int(parts[1]), (23...65_535).contains(value) else {
                        throw .invalidAddress(url)
                    }
                    mtu = value
                }
            }
            let parsed = try Socket.parse(rest)
            self.init(host: parsed.host, port: parsed.port, mtu: mtu)
        }

        public var description: String { "\(host):\(port)" }
    }

    public enum Limits {
        /// Outbound bytes queued per link before frames are dropped (counted `queueFull`).
        public static let maxQueuedBytes = 1 << 20
        /// How long close() keeps flushing queued frames before it gives up.
        public static let closeFlushMs = 2_000
        /// A reconnect whose TCP handshake has not completed by then is abandoned and retried later.
        public static let connectTimeoutMs = 3_000
        /// First delay before reconnecting (a hub restarted on loopback is back within a few hundred ms).
        public static let reconnectBaseMs: UInt64 = 200
        /// Longest delay between attempts: an attempt on loopback costs one refused connect, and a 5 s cap
        /// keeps recovery within one health-publishing period of the hub's return.
        public static let reconnectMaxMs: UInt64 = 5_000
        /// While a hub stays unreachable, one warning per this many failed attempts (about a minute at the
        /// cap); the others are logged at debug level.
        public static let failureLogEvery = 12
    }

    public let events = MeshInbound()
    private let inbox: OwnerInbox<(MeshLinkID, [UInt8])>
    private let initial: [Connection]
    private let logger: Logger
    private let health: Mutex<(isUp: Bool, detail: String)>

    /// One endpoint's link, owned by the loop.
    private struct Connection {
        enum State {
            case connected(fd: Int32, decoder: RadioFraming.Decoder, outbox: [UInt8])
            case connecting(fd: Int32, deadline: Int)
            case waiting(until: Int)
        }

        let link: MeshLinkID
        let endpoint: Endpoint
        var state: State
        var backoff = ReconnectBackoff(baseMs: Limits.reconnectBaseMs, maxMs: Limits.reconnectMaxMs)
        var downSince: Int?
        var lastError = ""

        var fd: Int32? {
            switch state {
            case .connected(let fd, _, _), .connecting(let fd, _): fd
            case .waiting: nil
            }
        }

        var isConnected: Bool {
            if case .connected = state { true } else { false }
        }
    }

    /// Whether a radio hub listens at `endpoint`: a TCP connect within `timeoutMs`, closed at once (nothing is
    /// sent, so the hub sees a peer come and go). Nil when it connected, else why not.
    public static func probe(_ endpoint: Endpoint, timeoutMs: Int32) -> RadioError? {
        let started: (fd: Int32, connected: Bool)
        do {
            started = try Socket.startConnect(host: endpoint.host, port: endpoint.port)
        } catch {
            return error
        }
        defer { _ = Glibc.close(started.fd) }
        if started.connected { return nil }
        var entry = pollfd(fd: started.fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&entry, 1, timeoutMs) == 1 else { return .system(call: "connect", errno: ETIMEDOUT) }
        let code = Socket.pendingError(started.fd)
        return code == 0 ? nil : .system(call: "connect", errno: code)
    }

    /// Connects to every endpoint (link IDs 1, 2, … in order) and starts the owner thread. An endpoint
    /// that cannot be reached now is an error (start-up should fail loudly); later losses are reconnected.
    public static func connect(_ endpoints: [Endpoint], logger: Logger = Logger(label: "radio")) throws(RadioError) -> RadioClientTransport {
        var connections: [Connection] = []
        for (index, endpoint) in endpoints.enumerated() {
            do {
                let fd = try Socket.connect(host: endpoint.host, port: endpoint.port)
                connections.append(Connection(
                    link: MeshLinkID(UInt64(index + 1)), endpoint: endpoint,
                    state: .connected(fd: fd, decoder: RadioFraming.Decoder(), outbox: [])))
            } catch {
                for connection in connections { connection.fd.map { _ = Glibc.close($0) } }
                throw error
            }
        }
        let transport: RadioClientTransport
        do {
            transport = try RadioClientTransport(connections: connections, logger: logger)
        } catch {
            for connection in connections { connection.fd.map { _ = Glibc.close($0) } }
            throw error
        }
        transport.startThread()
        return transport
    }

    private init(connections: [Connection], logger: Logger) throws(RadioError) {
        initial = connections
        health = Mutex(Self.health(of: connections))
        self.logger = logger
        do {
            inbox = try OwnerInbox()
        } catch {
            throw .system(call: "pipe", errno: error.code)
        }
    }

    public func send(_ frame: [UInt8], on link: MeshLinkID) {
        inbox.post((link, frame))
    }

    public func close() {
        inbox.requestClose()
    }

    public var status: MeshTransportStatus {
        let (isUp, detail) = health.withLock { $0 }
        return MeshTransportStatus(isUp: isUp, detail: detail, linksUp: events.linksUp, counters: events.counters)
    }

    private func startThread() {
        if !OwnerThread.detach({ self.loop() }) {
            health.withLock { $0 = (false, "could not start the radio thread") }
            events.finish()
        }
    }

    // MARK: Owner loop

    /// The owner loop: owns the connections' descriptors, decoders and outboxes.
    private func loop() {
        var connections = initial
        var random = SystemRandomNumberGenerator()
        for connection in connections { events.linkUp(connection.link, mtu: connection.endpoint.mtu, kind: .shared) }
        publishHealth(connections)
        var closeDeadline: Int?
        while true {
            let (frames, closing) = inbox.take()
            for (link, frame) in frames { queue(frame, on: link, in: &connections) }
            for index in connections.indices {
                guard case .connected(let fd, let decoder, var outbox) = connections[index].state, !outbox.isEmpty else { continue }
                let ok = Socket.flush(fd, &outbox)
                connections[index].state = .connected(fd: fd, decoder: decoder, outbox: outbox)
                if !ok { lost(&connections[index], reason: "write failed: \(String(cString: strerror(errno)))", random: &random) }
            }
            let now = Self.monotonicMs()
            if closing {
                if closeDeadline == nil { closeDeadline = now + Limits.closeFlushMs }
                let drained = connections.allSatisfy { connection in
                    if case .connected(_, _, let outbox) = connection.state { outbox.isEmpty } else { true }
                }
                if drained || now >= (closeDeadline ?? now) { break }
            } else {
                for index in connections.indices { advanceReconnect(&connections[index], now: now, random: &random) }
            }
            var fds = [pollfd(fd: inbox.wake.readFD, events: Int16(POLLIN), revents: 0)]
            var polled: [Int] = []
            for (index, connection) in connections.enumerated() {
                switch connection.state {
                case .connected(let fd, _, let outbox):
                    fds.append(pollfd(fd: fd, events: Int16(POLLIN) | (outbox.isEmpty ? 0 : Int16(POLLOUT)), revents: 0))
                    polled.append(index)
                case .connecting(let fd, _):
                    fds.append(pollfd(fd: fd, events: Int16(POLLOUT), revents: 0))
                    polled.append(index)
                case .waiting:
                    break
                }
            }
            let timeout = closing ? 50 : pollTimeout(connections, now: now)
            guard poll(&fds, nfds_t(fds.count), Int32(timeout)) >= 0 || errno == EINTR else {
                logger.error("radio poll failed; closing the transport", [("errno", .integer(Int64(errno)))])
                break
            }
            if fds[0].revents != 0 { inbox.wake.drain() }
            for (slot, index) in polled.enumerated() {
                let revents = fds[slot + 1].revents
                guard revents != 0 else { continue }
                service(&connections[index], revents: revents, random: &random)
            }
            if publishHealthLater {
                publishHealthLater = false
                publishHealth(connections)
            }
        }
        for connection in connections {
            guard let fd = connection.fd else { continue }
            Glibc.close(fd)
            if connection.isConnected { events.linkDown(connection.link) }
        }
        inbox.ownerFinished()
        health.withLock { $0 = (false, "closed") }
        events.finish()
    }

    private func queue(_ frame: [UInt8], on link: MeshLinkID, in connections: inout [Connection]) {
        guard let index = connections.firstIndex(where: { $0.link == link }),
            case .connected(let fd, let decoder, var outbox) = connections[index].state
        else {
            events.countOutboundDrop(.linkDown, on: link)
            return
        }
        guard let wire = RadioFraming.encode(frame) else {
            events.countOutboundDrop(.tooLarge, on: link)
            return
        }
        guard outbox.count + wire.count <= Limits.maxQueuedBytes else {
            events.countOutboundDrop(.queueFull, on: link)
            return
        }
        outbox += wire
        connections[index].state = .connected(fd: fd, decoder: decoder, outbox: outbox)
    }

    /// Readiness of one polled connection.
    private func service(_ connection: inout Connection, revents: Int16, random: inout SystemRandomNumberGenerator) {
        switch connection.state {
        case .connected(let fd, var decoder, var outbox):
            if revents & Int16(POLLOUT) != 0, !Socket.flush(fd, &outbox) {
                connection.state = .connected(fd: fd, decoder: decoder, outbox: outbox)
                return lost(&connection, reason: "write failed: \(String(cString: strerror(errno)))", random: &random)
            }
            var frames: [[UInt8]] = []
            if revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0 {
                guard let bytes = Socket.readAvailable(fd) else {
                    connection.state = .connected(fd: fd, decoder: decoder, outbox: outbox)
                    return lost(&connection, reason: "connection closed by the hub", random: &random)
                }
                frames = decoder.push(bytes)
            }
            connection.state = .connected(fd: fd, decoder: decoder, outbox: outbox)
            for frame in frames { events.frame(connection.link, frame) }
        case .connecting(let fd, _):
            let error = Socket.pendingError(fd)
            guard error == 0 else {
                Glibc.close(fd)
                return failedAttempt(&connection, reason: String(cString: strerror(error)), random: &random)
            }
            Socket.configureConnected(fd)
            connection.state = .connected(fd: fd, decoder: RadioFraming.Decoder(), outbox: [])
            restored(&connection)
        case .waiting:
            break
        }
    }

    // MARK: Reconnecting

    private func lost(_ connection: inout Connection, reason: String, random: inout SystemRandomNumberGenerator) {
        if let fd = connection.fd { Glibc.close(fd) }
        events.linkDown(connection.link)
        let now = Self.monotonicMs()
        connection.downSince = now
        connection.lastError = reason
        connection.backoff.reset()
        let delay = connection.backoff.nextDelay(random: &random)
        connection.state = .waiting(until: now + Int(delay))
        logger.warning("radio hub connection lost; reconnecting", [
            ("link", .string(connection.link.description)), ("hub", .string(connection.endpoint.description)),
            ("reason", .string(reason)), ("retry.ms", .integer(Int64(delay))),
        ])
        publishHealthLater = true
    }

    private func failedAttempt(_ connection: inout Connection, reason: String, random: inout SystemRandomNumberGenerator) {
        let delay = connection.backoff.nextDelay(random: &random)
        connection.lastError = reason
        connection.state = .waiting(until: Self.monotonicMs() + Int(delay))
        let attempts = connection.backoff.failures - 1
        let fields: [(String, JSONValue)] = [
            ("link", .string(connection.link.description)), ("hub", .string(connection.endpoint.description)),
            ("reason", .string(reason)), ("attempts", .integer(Int64(attempts))), ("retry.ms", .integer(Int64(delay))),
        ]
        if attempts % Limits.failureLogEvery == 0 {
            logger.warning("radio hub still unreachable", fields)
        } else {
            logger.debug("radio hub reconnect failed", fields)
        }
        publishHealthLater = true
    }

    private func restored(_ connection: inout Connection) {
        let downMs = connection.downSince.map { Self.monotonicMs() - $0 } ?? 0
        logger.notice("radio hub connection restored", [
            ("link", .string(connection.link.description)), ("hub", .string(connection.endpoint.description)),
            ("attempts", .integer(Int64(connection.backoff.failures))), ("down.ms", .integer(Int64(downMs))),
        ])
        connection.backoff.reset()
        connection.downSince = nil
        connection.lastError = ""
        events.countReconnect()
        events.linkUp(connection.link, mtu: connection.endpoint.mtu, kind: .shared)
        publishHealthLater = true
    }

    /// Starts a due reconnect, or gives up on one that has taken too long.
    private func advanceReconnect(_ connection: inout Connection, now: Int, random: inout SystemRandomNumberGenerator) {
        switch connection.state {
        case .waiting(let until) where now >= until:
            do {
                let (fd, connected) = try Socket.startConnect(host: connection.endpoint.host, port: connection.endpoint.port)
                if connected {
                    Socket.configureConnected(fd)
                    connection.state = .connected(fd: fd, decoder: RadioFraming.Decoder(), outbox: [])
                    restored(&connection)
                } else {
                    connection.state = .connecting(fd: fd, deadline: now + Limits.connectTimeoutMs)
                }
            } catch {
                failedAttempt(&connection, reason: error.description, random: &random)
            }
        case .connecting(let fd, let deadline) where now >= deadline:
            Glibc.close(fd)
            failedAttempt(&connection, reason: "connect timed out", random: &random)
        default:
            break
        }
    }

    /// Until the next reconnect or connect deadline; -1 (no timeout: the socket or the wake pipe wakes the loop)
    /// when every connection is up.
    private func pollTimeout(_ connections: [Connection], now: Int) -> Int {
        var timeout: Int?
        for connection in connections {
            switch connection.state {
            case .waiting(let until): timeout = min(timeout ?? .max, max(0, until - now))
            case .connecting(_, let deadline): timeout = min(timeout ?? .max, max(0, deadline - now))
            case .connected: break
            }
        }
        return timeout ?? -1
    }

    // MARK: Health

    /// Set by the loop's handlers when the health line must be rebuilt (published once per loop turn).
    private var publishHealthLater = false

    private func publishHealth(_ connections: [Connection]) {
        let state = Self.health(of: connections)
        health.withLock { $0 = state }
    }

    private static func health(of connections: [Connection]) -> (isUp: Bool, detail: String) {
        let up = connections.filter(\.isConnected).count
        var detail = "\(up) of \(connections.count) hub connection\(connections.count == 1 ? "" : "s") up"
        for connection in connections where !connection.isConnected {
            let attempt = connection.backoff.failures
            detail += "; \(connection.link) \(connection.endpoint): \(connection.lastError), reconnecting"
                + (attempt > 0 ? " (attempt \(attempt + 1))" : "")
        }
        return (up == connections.count, detail)
    }

    private static func monotonicMs() -> Int {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return spec.tv_sec * 1_000 + spec.tv_nsec / 1_000_000
    }
}
