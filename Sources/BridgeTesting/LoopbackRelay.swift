import BotCrypto
public import BotSupport
public import Nostr
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A Nostr relay on 127.0.0.1 for the in-process test world: NIP-01 over RFC 6455, written here so bridges reach it
/// through their real relay pool code (lws client, frames, subscriptions, `OK`, `EOSE`) without a Python process.
///
/// It does what a relay does for the bridge and no more: `EVENT` is verified (id and Schnorr signature), stored
/// (every kind, ephemeral ones too, as the test relays the suite grew up with do) and answered `OK`; `REQ` sends the
/// stored matches (newest first, up to the filter's `limit`), `EOSE`, then live matches; `CLOSE` ends a subscription.
/// Tests watch what was published (``waitForEvent(within:_:)``), post as a client would (``post(_:)``), take the
/// relay away and back (``goDown()``, ``comeBack()``), and make it refuse large filters as strict relays do
/// (``setMaxFilterValues(_:)``).
///
/// Threading: one owner thread polls the listener, the clients and a wake pipe; it owns every socket and buffer. The
/// stored events and the waiters are behind a lock, for the tests' threads.
public final class LoopbackRelay: @unchecked Sendable {
    public enum Limits {
        /// Largest message read from a client (the bridge's events are ≤ 64 KiB).
        public static let maxMessageBytes = 1 << 20
        /// Clients at once.
        public static let maxClients = 64
    }

    /// One `REQ` a client sent, numbered in arrival order.
    public struct Subscription: Sendable {
        public let serial: Int
        public let id: String
        public let filters: [NostrFilter]
    }

    private struct Shared {
        var ids = Set<String>()
        var down = false
        var posted: [NostrEvent] = []
        var stopping = false
        var requests = 0
        var maxFilterValues: Int?
        var refusedKinds: [Int: String] = [:]
    }

    /// Every event the relay holds, in arrival order (published by a client or posted by a test).
    public let stored = Recorder<NostrEvent>()
    /// Every subscription clients opened, in order.
    public let subscriptions = Recorder<Subscription>()
    /// Every valid event clients published, duplicates included: how often a bridge sent each.
    public let published = Recorder<NostrEvent>()

    public let port: UInt16
    public var url: String { "ws://127.0.0.1:\(port)" }
    private let listenFD: Int32
    private let wake: WakePipe
    private let shared = Mutex(Shared())
    private let finished = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let ended = Atomic<Bool>(false)
    private let clockOffset = Atomic<Int64>(0)

    /// Sets how far ahead (positive) or behind the relay's clock is, in seconds, as its upgrade answers' `Date`
    /// header shows it (a relay, or a bridge host, without network time).
    public func setClockOffset(_ seconds: Int64) { clockOffset.store(seconds, ordering: .relaxed) }

    /// Refuses a `REQ` whose filters hold more tag values than `limit` together (nostream's `maxFilterValues`, COURIER.md
    /// §4.3) with `CLOSED`, as such relays do; nil accepts any.
    public func setMaxFilterValues(_ limit: Int?) { shared.withLock { $0.maxFilterValues = limit } }

    /// Refuses `EVENT`s of these kinds with `OK false` and the message given (`blocked: kind 30078 not accepted`), as a
    /// relay that takes only some kinds does; they are not stored.
    public func setRefusedKinds(_ kinds: [Int: String]) { shared.withLock { $0.refusedKinds = kinds } }

    /// The relay's clock (Unix seconds) for its `Date` headers: the wall clock, or a test world's clock.
    private let unixNow: @Sendable () -> Int64

    /// Listens on a free loopback port and starts the owner thread; `unixNow` is its clock (default the wall clock).
    public init(unixNow: @escaping @Sendable () -> Int64 = { Int64(SystemTime.wallClockMs() / 1000) }) throws {
        self.unixNow = unixNow
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw RelayServerError.system("socket") }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw RelayServerError.system("bind/listen")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = UInt16(bigEndian: actual.sin_port)
        listenFD = fd
        wake = try WakePipe()
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        guard OwnerThread.detach({ [self] in loop() }) else { throw RelayServerError.system("thread") }
    }

    deinit { close(listenFD) }

    // MARK: For tests

    /// Every event the relay holds, in arrival order.
    public var events: [NostrEvent] { stored.all }

    /// The first stored event matching `match` — already held, or the next one to arrive within `seconds` (real
    /// time: a backstop for a bug, never a schedule); nil when none came.
    public func waitForEvent(within seconds: Double = 20, _ match: @escaping @Sendable (NostrEvent) -> Bool) async -> NostrEvent? {
        await stored.first(within: seconds, where: match)
    }

    /// The first subscription matching `match` opened after the `after`-th (bounded like ``waitForEvent(within:_:)``).
    public func subscription(after: Int = 0, within seconds: Double = 20, where match: @escaping @Sendable (Subscription) -> Bool = { _ in true }) async -> Subscription? {
        await subscriptions.first(within: seconds) { $0.serial > after && match($0) }
    }

    /// Stores `event` and sends it to every matching subscription, as if a client had published it.
    public func post(_ event: NostrEvent) {
        shared.withLock { $0.posted.append(event) }
        wake.poke()
    }

    /// The relay goes away: every connection is dropped and new ones are refused (closed at once) until
    /// ``comeBack()``. What it stored stays.
    public func goDown() {
        shared.withLock { $0.down = true }
        wake.poke()
    }

    public func comeBack() {
        shared.withLock { $0.down = false }
        wake.poke()
    }

    /// Closes every connection and the listener; waits for the owner thread to end.
    public func stop() async {
        shared.withLock { $0.stopping = true }
        wake.poke()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = finished.withLock { slot -> Bool in
                if ended.load(ordering: .acquiring) { return true }
                slot = continuation
                return false
            }
            if done { continuation.resume() }
        }
    }

    // MARK: Owner thread

    private final class Client {
        let fd: Int32
        var input: [UInt8] = []
        var output: [UInt8] = []
        var upgraded = false
        var fragments: [UInt8] = []
        var subscriptions: [String: [NostrFilter]] = [:]
        var closing = false

        init(fd: Int32) { self.fd = fd }
    }

    private func loop() {
        var clients: [Int32: Client] = [:]
        while true {
            let (posted, down, stopping) = shared.withLock { shared in
                defer { shared.posted.removeAll() }
                return (shared.posted, shared.down, shared.stopping)
            }
            if stopping { break }
            if down {
                for client in clients.values { close(client.fd) }
                clients.removeAll()
            }
            for event in posted { store(event, from: nil, clients: clients) }
            var fds = [pollfd(fd: wake.readFD, events: Int16(POLLIN), revents: 0), pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            let order = Array(clients.keys)
            for fd in order {
                let wantsWrite = !(clients[fd]?.output.isEmpty ?? true)
                fds.append(pollfd(fd: fd, events: Int16(POLLIN) | (wantsWrite ? Int16(POLLOUT) : 0), revents: 0))
            }
            guard poll(&fds, nfds_t(fds.count), -1) >= 0 || errno == EINTR else { break }
            if fds[0].revents != 0 { wake.drain() }
            if fds[1].revents != 0 { accept(into: &clients, refuse: down) }
            for (slot, fd) in order.enumerated() {
                guard let client = clients[fd] else { continue }
                let revents = fds[slot + 2].revents
                if revents & Int16(POLLIN | POLLHUP | POLLERR) != 0, !read(client, clients: clients) { drop(client, from: &clients); continue }
                if !client.output.isEmpty, !flush(client) { drop(client, from: &clients); continue }
                if client.closing, client.output.isEmpty { drop(client, from: &clients) }
            }
        }
        for client in clients.values { close(client.fd) }
        ended.store(true, ordering: .releasing)
        finished.withLock { $0 }?.resume()
    }

    private func accept(into clients: inout [Int32: Client], refuse: Bool) {
        while true {
            let fd = Glibc.accept(listenFD, nil, nil)
            guard fd >= 0 else { return }
            guard !refuse, clients.count < Limits.maxClients else {
                close(fd)
                continue
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var on: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            clients[fd] = Client(fd: fd)
        }
    }

    private func drop(_ client: Client, from clients: inout [Int32: Client]) {
        close(client.fd)
        clients[client.fd] = nil
    }

    /// Reads what is there and handles every whole request or frame; false when the client is gone.
    private func read(_ client: Client, clients: [Int32: Client]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(client.fd, $0.baseAddress, $0.count) }
            if count > 0 {
                client.input += chunk[0..<count]
                guard client.input.count <= Limits.maxMessageBytes + 16 else { return false }
                continue
            }
            if count == 0 { return false }
            if errno == EAGAIN || errno == EWOULDBLOCK { break }
            if errno == EINTR { continue }
            return false
        }
        if !client.upgraded { return handshake(client) && (client.input.isEmpty || frames(client, clients: clients)) }
        return frames(client, clients: clients)
    }

    private func flush(_ client: Client) -> Bool {
        while !client.output.isEmpty {
            let written = client.output.withUnsafeBytes { Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written > 0 {
                client.output.removeFirst(written)
                continue
            }
            return written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
        }
        return true
    }

    /// RFC 6455 §4.2: the client's upgrade request, answered 101 with `Sec-WebSocket-Accept`.
    private func handshake(_ client: Client) -> Bool {
        let terminator: [UInt8] = [13, 10, 13, 10]
        guard let end = client.input.firstRange(of: terminator) else { return client.input.count < 16_384 }
        let head = String(decoding: client.input[..<end.lowerBound], as: UTF8.self)
        client.input.removeSubrange(..<end.upperBound)
        let key = head.split(separator: "\r\n").compactMap { line -> String? in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "sec-websocket-key" else { return nil }
            return parts[1].trimmingSpaces
        }.first
        guard let key else { return false }
        let accept = Base64.encode(SHA1.hash(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)))
        let date = HTTPDate.format(unixNow() + clockOffset.load(ordering: .relaxed))
        client.output += Array(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(accept)\r\nDate: \(date)\r\n\r\n").utf8)
        client.upgraded = true
        return true
    }

    /// Every whole frame in the input (masked, as a client must send them); false on a protocol error.
    private func frames(_ client: Client, clients: [Int32: Client]) -> Bool {
        while let frame = WebSocketFrame.take(from: &client.input) {
            guard let frame else { return false }
            switch frame.opcode {
            case 0x0, 0x1, 0x2:
                client.fragments += frame.payload
                guard client.fragments.count <= Limits.maxMessageBytes else { return false }
                if frame.fin {
                    message(client.fragments, from: client, clients: clients)
                    client.fragments = []
                }
            case 0x8:
                client.output += WebSocketFrame.encode(opcode: 0x8, payload: [])
                client.closing = true
            case 0x9:
                client.output += WebSocketFrame.encode(opcode: 0xA, payload: frame.payload)
            default:
                break
            }
        }
        return true
    }

    private func message(_ bytes: [UInt8], from client: Client, clients: [Int32: Client]) {
        guard let value = try? JSONParser().parse(bytes), case .array(let items) = value, let verb = items.first?.stringValue else { return }
        switch verb {
        case "EVENT" where items.count == 2:
            guard let event = try? UnverifiedEvent(json: items[1]).verified() else {
                let id = items[1]["id"]?.stringValue ?? ""
                send(.array([.string("OK"), .string(id), .bool(false), .string("invalid: bad id or signature")]), to: client)
                return
            }
            published.append(event)
            if let refusal = shared.withLock({ $0.refusedKinds[event.kind] }) {
                send(.array([.string("OK"), .string(event.id.hex), .bool(false), .string(refusal)]), to: client)
                return
            }
            let duplicate = !store(event, from: client, clients: clients)
            send(.array([.string("OK"), .string(event.id.hex), .bool(true), .string(duplicate ? "duplicate: held" : "")]), to: client)
        case "REQ" where items.count >= 3:
            guard let id = items[1].stringValue else { return }
            let filters = items.dropFirst(2).compactMap(Self.filter)
            let values = filters.reduce(0) { $0 + $1.tags.values.reduce(0) { $0 + $1.count } }
            if let limit = shared.withLock({ $0.maxFilterValues }), values > limit {
                client.subscriptions[id] = nil
                send(.array([.string("CLOSED"), .string(id), .string("error: too many filter values (\(values) > \(limit))")]), to: client)
                return
            }
            client.subscriptions[id] = filters
            let serial = shared.withLock { shared in
                shared.requests += 1
                return shared.requests
            }
            subscriptions.append(Subscription(serial: serial, id: id, filters: filters))
            let held = stored.all
            var sent = Set<String>()
            for filter in filters {
                let matches = held.filter(filter.matches).sorted { $0.createdAt > $1.createdAt }.prefix(filter.limit ?? .max)
                for event in matches.reversed() where sent.insert(event.id.hex).inserted {
                    send(.array([.string("EVENT"), .string(id), event.jsonValue]), to: client)
                }
            }
            send(.array([.string("EOSE"), .string(id)]), to: client)
        case "CLOSE" where items.count == 2:
            if let id = items[1].stringValue { client.subscriptions[id] = nil }
        default:
            break
        }
    }

    /// Stores a new event and sends it to every live subscription it matches; false for a duplicate.
    @discardableResult
    private func store(_ event: NostrEvent, from _: Client?, clients: [Int32: Client]) -> Bool {
        guard shared.withLock({ $0.ids.insert(event.id.hex).inserted }) else { return false }
        stored.append(event)
        for client in clients.values {
            for (id, filters) in client.subscriptions where filters.contains(where: { $0.matches(event) }) {
                send(.array([.string("EVENT"), .string(id), event.jsonValue]), to: client)
            }
        }
        return true
    }

    private func send(_ value: JSONValue, to client: Client) {
        client.output += WebSocketFrame.encode(opcode: 0x1, payload: Array(JSONWriter.compact(value).utf8))
    }

    /// A NIP-01 filter object.
    static func filter(_ value: JSONValue) -> NostrFilter? {
        guard case .object(let members) = value else { return nil }
        var filter = NostrFilter()
        for (key, member) in members {
            let strings = member.arrayValue?.compactMap(\.stringValue)
            switch key {
            case "ids": filter.ids = strings
            case "authors": filter.authors = strings
            case "kinds": filter.kinds = member.arrayValue?.compactMap { $0.integerValue.map(Int.init) }
            case "since": filter.since = member.integerValue
            case "until": filter.until = member.integerValue
            case "limit": filter.limit = member.integerValue.map(Int.init)
            default:
                if key.hasPrefix("#"), key.count == 2, let strings { filter.tags[String(key.dropFirst())] = strings }
            }
        }
        return filter
    }
}

public enum RelayServerError: Error, CustomStringConvertible {
    case system(String)

    public var description: String {
        switch self {
        case .system(let call): "\(call): \(String(cString: strerror(errno)))"
        }
    }
}

/// RFC 6455 §5.2 framing, as much as a relay needs: read a client's masked frames, write unmasked ones.
enum WebSocketFrame {
    struct Frame {
        let fin: Bool
        let opcode: UInt8
        let payload: [UInt8]
    }

    /// The first whole frame of `buffer` (removed from it); nil when not whole yet; `.some(nil)` when malformed
    /// (an unmasked client frame, a length over the limit).
    static func take(from buffer: inout [UInt8]) -> Frame?? {
        guard buffer.count >= 2 else { return nil }
        let fin = buffer[0] & 0x80 != 0
        let opcode = buffer[0] & 0x0F
        guard buffer[1] & 0x80 != 0 else { return .some(nil) }
        var length = Int(buffer[1] & 0x7F)
        var offset = 2
        if length == 126 {
            guard buffer.count >= 4 else { return nil }
            length = Int(buffer[2]) << 8 | Int(buffer[3])
            offset = 4
        } else if length == 127 {
            guard buffer.count >= 10 else { return nil }
            length = buffer[2..<10].reduce(0) { $0 << 8 | Int($1) }
            offset = 10
        }
        guard length <= LoopbackRelay.Limits.maxMessageBytes else { return .some(nil) }
        guard buffer.count >= offset + 4 + length else { return nil }
        let mask = Array(buffer[offset..<offset + 4])
        let start = offset + 4
        var payload = Array(buffer[start..<start + length])
        for index in payload.indices { payload[index] ^= mask[index % 4] }
        buffer.removeFirst(start + length)
        return .some(Frame(fin: fin, opcode: opcode, payload: payload))
    }

    static func encode(opcode: UInt8, payload: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            frame.append(UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(127)
            frame += (0..<8).reversed().map { UInt8(truncatingIfNeeded: payload.count >> (8 * $0)) }
        }
        return frame + payload
    }
}
