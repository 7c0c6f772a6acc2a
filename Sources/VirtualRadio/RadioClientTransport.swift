import BotSupport
public import Mesh
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A ``MeshTransport`` over one or more virtual-radio hubs: each TCP connection is one link.
///
/// Threading: one owner thread runs poll() over the sockets and a wake pipe, and owns the sockets and their
/// buffers. ``send(_:on:)`` and ``close()`` only enqueue under a mutex and wake the loop. Inbound frames
/// leave through ``events`` (bounded: 4 096 events; overflow is dropped and counted in ``droppedEvents``).
public final class RadioClientTransport: MeshTransport, @unchecked Sendable {
    public struct Endpoint: Sendable, Equatable {
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
    }

    public enum Limits {
        /// Inbound events buffered for the consumer.
        public static let eventBuffer = 4_096
        /// Outbound bytes queued per link before frames are dropped.
        public static let maxQueuedBytes = 1 << 20
        /// How long close() keeps flushing queued frames before it gives up.
        public static let closeFlushMs = 2_000
    }

    public let events: AsyncStream<MeshTransportEvent>
    private let continuation: AsyncStream<MeshTransportEvent>.Continuation
    private let inbox: OwnerInbox<(MeshLinkID, [UInt8])>
    private let sockets: [(link: MeshLinkID, fd: Int32, mtu: Int)]
    private let dropped = Atomic<Int>(0)

    /// Connects to every endpoint (link IDs 1, 2, … in order) and starts the owner thread.
    public static func connect(_ endpoints: [Endpoint]) throws(RadioError) -> RadioClientTransport {
        var sockets: [(MeshLinkID, Int32, Int)] = []
        for (index, endpoint) in endpoints.enumerated() {
            do {
                sockets.append((MeshLinkID(UInt64(index + 1)), try Socket.connect(host: endpoint.host, port: endpoint.port), endpoint.mtu))
            } catch {
                for socket in sockets { Glibc.close(socket.1) }
                throw error
            }
        }
        let transport: RadioClientTransport
        do {
            transport = try RadioClientTransport(sockets: sockets)
        } catch {
            for socket in sockets { Glibc.close(socket.1) }
            throw error
        }
        transport.startThread()
        return transport
    }

    private init(sockets: [(MeshLinkID, Int32, Int)]) throws(RadioError) {
        self.sockets = sockets.map { (link: $0.0, fd: $0.1, mtu: $0.2) }
        do {
            inbox = try OwnerInbox()
        } catch {
            throw .system(call: "pipe", errno: error.code)
        }
        (events, continuation) = AsyncStream.makeStream(of: MeshTransportEvent.self, bufferingPolicy: .bufferingOldest(Limits.eventBuffer))
    }

    /// Inbound events dropped because the consumer fell behind.
    public var droppedEvents: Int { dropped.load(ordering: .relaxed) }

    public func send(_ frame: [UInt8], on link: MeshLinkID) {
        inbox.post((link, frame))
    }

    public func close() {
        inbox.requestClose()
    }

    private func emit(_ event: MeshTransportEvent) {
        if case .dropped = continuation.yield(event) { dropped.add(1, ordering: .relaxed) }
    }

    private func startThread() {
        if !OwnerThread.detach({ self.loop() }) { continuation.finish() }
    }

    /// The owner loop: owns `sockets`' descriptors, decoders and outboxes.
    private func loop() {
        var open = sockets.map { (link: $0.link, fd: $0.fd, decoder: RadioFraming.Decoder(), outbox: [UInt8]()) }
        for socket in sockets { emit(.linkUp(socket.link, mtu: socket.mtu)) }
        var closeDeadline: Int?
        while !open.isEmpty {
            let (frames, closing) = inbox.take()
            for (link, frame) in frames {
                guard let index = open.firstIndex(where: { $0.link == link }), let wire = RadioFraming.encode(frame),
                    open[index].outbox.count + wire.count <= Limits.maxQueuedBytes
                else { continue }
                open[index].outbox += wire
            }
            for index in open.indices where !open[index].outbox.isEmpty {
                _ = Socket.flush(open[index].fd, &open[index].outbox)
            }
            if closing {
                let now = Self.monotonicMs()
                if closeDeadline == nil { closeDeadline = now + Limits.closeFlushMs }
                if open.allSatisfy({ $0.outbox.isEmpty }) || now >= (closeDeadline ?? now) { break }
            }
            var fds = [pollfd(fd: inbox.wake.readFD, events: Int16(POLLIN), revents: 0)]
            for socket in open {
                fds.append(pollfd(fd: socket.fd, events: Int16(POLLIN) | (socket.outbox.isEmpty ? 0 : Int16(POLLOUT)), revents: 0))
            }
            guard poll(&fds, nfds_t(fds.count), closing ? 50 : 1_000) >= 0 || errno == EINTR else { break }
            if fds[0].revents != 0 { inbox.wake.drain() }
            var gone: [Int] = []
            for index in open.indices {
                let revents = fds[index + 1].revents
                if revents & Int16(POLLOUT) != 0, !Socket.flush(open[index].fd, &open[index].outbox) {
                    gone.append(index)
                    continue
                }
                guard revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0 else { continue }
                guard let bytes = Socket.readAvailable(open[index].fd) else {
                    gone.append(index)
                    continue
                }
                for frame in open[index].decoder.push(bytes) { emit(.frame(open[index].link, frame)) }
            }
            for index in gone.reversed() {
                Glibc.close(open[index].fd)
                emit(.linkDown(open[index].link))
                open.remove(at: index)
            }
        }
        for socket in open {
            Glibc.close(socket.fd)
            emit(.linkDown(socket.link))
        }
        inbox.ownerFinished()
        continuation.finish()
    }


    private static func monotonicMs() -> Int {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return spec.tv_sec * 1_000 + spec.tv_nsec / 1_000_000
    }
}
