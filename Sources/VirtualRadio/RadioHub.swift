import BotSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One segment of "air" for the virtual radio: a loopback TCP server that delivers every frame it receives
/// on one connection to every other connection, dropping frames larger than the MTU (as a BLE link would
/// refuse them, so senders must fragment) and, optionally, a random fraction `loss` of deliveries.
///
/// Threading: ``run()`` is the owner loop (poll() over the listener, the wake pipe and all connections); it
/// owns every descriptor and buffer. ``stop()`` and ``stats`` are safe from any thread.
public final class RadioHub: @unchecked Sendable {
    public struct Configuration: Sendable {
        /// Largest frame delivered; larger frames are dropped and counted (BLE: ATT MTU − 3; 512 for MTU 517).
        public var mtu: Int = 512
        /// Probability that one delivery (one frame to one receiver) is lost.
        public var loss: Double = 0
        public init(mtu: Int = 512, loss: Double = 0) {
            self.mtu = mtu
            self.loss = loss
        }
    }

    public enum Limits {
        /// Per-receiver backlog; a receiver that does not read is dropped from, not waited for.
        public static let maxQueuedBytes = 1 << 20
        /// Connections per hub (poll set size).
        public static let maxConnections = 256
    }

    public struct Stats: Sendable, Equatable {
        public var connections = 0
        public var framesIn = 0
        public var deliveries = 0
        public var droppedOverMTU = 0
        public var droppedLoss = 0
        public var droppedBacklog = 0
    }

    private struct Connection {
        let fd: Int32
        var decoder = RadioFraming.Decoder()
        var outbox: [UInt8] = []
    }

    public let port: UInt16
    public let configuration: Configuration
    private let listenFD: Int32
    private let wake: WakePipe
    private let stopped = Atomic<Bool>(false)
    private let statsBox = Mutex(Stats())
    private let log: @Sendable (String, [(String, String)]) -> Void

    /// Binds `host:port` (port 0 picks a free port; see ``port``). `log` receives (event, fields) from the loop.
    public init(
        host: String,
        port: UInt16,
        configuration: Configuration,
        log: @escaping @Sendable (String, [(String, String)]) -> Void = { _, _ in }
    ) throws(RadioError) {
        let listener = try Socket.listen(host: host, port: port)
        listenFD = listener.fd
        self.port = listener.port
        self.configuration = configuration
        self.log = log
        do {
            wake = try WakePipe()
        } catch {
            close(listener.fd)
            throw .system(call: "pipe", errno: error.code)
        }
    }

    public var stats: Stats { statsBox.withLock { $0 } }

    /// Asks the loop to close everything and return.
    public func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
        wake.poke()
    }

    /// The owner loop; returns after ``stop()``.
    public func run() {
        var random = SystemRandomNumberGenerator()
        var connections: [Connection] = []
        defer {
            for connection in connections { close(connection.fd) }
            close(listenFD)
        }
        while !stopped.load(ordering: .sequentiallyConsistent) {
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.readFD, events: Int16(POLLIN), revents: 0)]
            for connection in connections {
                let events = Int16(POLLIN) | (connection.outbox.isEmpty ? 0 : Int16(POLLOUT))
                fds.append(pollfd(fd: connection.fd, events: events, revents: 0))
            }
            guard poll(&fds, nfds_t(fds.count), 1_000) >= 0 else {
                if errno == EINTR { continue }
                log("hub.pollFailed", [("errno", String(errno))])
                return
            }
            if fds[1].revents != 0 { wake.drain() }
            var closed = Set<Int>()
            for index in connections.indices {
                let revents = fds[index + 2].revents
                if revents & Int16(POLLOUT) != 0, !Socket.flush(connections[index].fd, &connections[index].outbox) {
                    closed.insert(index)
                    continue
                }
                guard revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0 else { continue }
                guard let bytes = Socket.readAvailable(connections[index].fd) else {
                    closed.insert(index)
                    continue
                }
                for frame in connections[index].decoder.push(bytes) {
                    deliver(frame, from: index, to: &connections, random: &random)
                }
            }
            for index in closed.sorted(by: >) {
                close(connections[index].fd)
                connections.remove(at: index)
                statsBox.withLock { $0.connections = connections.count }
                log("hub.disconnected", [("connections", String(connections.count))])
            }
            if fds[0].revents & Int16(POLLIN) != 0 {
                while true {
                    let fd = accept(listenFD, nil, nil)
                    guard fd >= 0 else { break }
                    guard connections.count < Limits.maxConnections else {
                        close(fd)
                        continue
                    }
                    Socket.setNonBlocking(fd)
                    var one: Int32 = 1
                    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    connections.append(Connection(fd: fd))
                    statsBox.withLock { $0.connections = connections.count }
                    log("hub.connected", [("connections", String(connections.count))])
                }
            }
            // Opportunistic flush so a frame is not held until the next poll round.
            for index in connections.indices where !connections[index].outbox.isEmpty {
                _ = Socket.flush(connections[index].fd, &connections[index].outbox)
            }
        }
    }

    private func deliver(_ frame: [UInt8], from sender: Int, to connections: inout [Connection], random: inout SystemRandomNumberGenerator) {
        var stats = statsBox.withLock { $0 }
        defer { statsBox.withLock { $0 = stats } }
        stats.framesIn += 1
        guard frame.count <= configuration.mtu, let wire = RadioFraming.encode(frame) else {
            stats.droppedOverMTU += 1
            return
        }
        for index in connections.indices where index != sender {
            if configuration.loss > 0, Double.random(in: 0..<1, using: &random) < configuration.loss {
                stats.droppedLoss += 1
                continue
            }
            guard connections[index].outbox.count + wire.count <= Limits.maxQueuedBytes else {
                stats.droppedBacklog += 1
                continue
            }
            connections[index].outbox += wire
            stats.deliveries += 1
        }
    }
}
