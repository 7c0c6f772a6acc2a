import BotSupport

/// A `ws://` or `wss://` URL split into what libwebsockets needs.
public struct WebSocketEndpoint: Hashable, Sendable, CustomStringConvertible {
    public let isTLS: Bool
    /// Host name (or IP literal) for DNS, the `Host:` header, SNI and the certificate check.
    public let host: String
    public let port: Int32
    /// Path plus query, at least `/`.
    public let path: String

    /// Parses `ws://host[:port][/path][?query]` or `wss://…` (the rules of ``NetworkURL``: IPv6 literals in
    /// brackets, no user info, no fragment, no spaces, port 1…65535); a refusal names the reason.
    public init(url: String) throws(WebSocketError) {
        let parsed: NetworkURL
        do {
            parsed = try NetworkURL.parse(url, schemes: ["ws", "wss"])
        } catch {
            throw .invalidURL(url, reason: error.description)
        }
        isTLS = parsed.scheme == "wss"
        host = parsed.host
        port = Int32(parsed.port ?? (isTLS ? 443 : 80))
        path = parsed.pathAndQuery.isEmpty ? "/" : parsed.pathAndQuery.hasPrefix("?") ? "/" + parsed.pathAndQuery : parsed.pathAndQuery
    }

    public var description: String {
        let defaultPort: Int32 = isTLS ? 443 : 80
        let hostText = host.contains(":") ? "[\(host)]" : host
        return (isTLS ? "wss://" : "ws://") + hostText + (port == defaultPort ? "" : ":\(port)") + (path == "/" ? "" : path)
    }
}

/// Failures of the WebSocket runtime, keeping the C function's name where one failed.
public enum WebSocketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The URL and what is wrong with it.
    case invalidURL(String, reason: String)
    case lws(function: String)
    case thread(function: String, code: Int32)

    public var description: String {
        switch self {
        case .invalidURL(let url, let reason): "relay URL '\(url)': \(reason)"
        case .lws(let function): "libwebsockets \(function) failed"
        case .thread(let function, let code): "\(function) failed with \(code)"
        }
    }
}

/// Identifies one connection attempt (a reconnect is a new connection).
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let raw: Int
    /// Public so test transports can mint ids; the runtime numbers its connections from 1.
    public init(raw: Int) { self.raw = raw }
    public var description: String { "ws#\(raw)" }
}

/// Why a connection ended or never came up.
public enum WebSocketFailure: Equatable, Sendable, CustomStringConvertible {
    /// The name did not resolve (getaddrinfo error text).
    case dns(String)
    /// TCP, TLS or handshake failure; `detail` is lws's string plus either OpenSSL's certificate verdict
    /// (`(certificate: hostname mismatch)`, `(certificate: self-signed certificate)`, …) or the last lws
    /// log error line of the service thread (`(lws: …)`).
    case connect(String)
    /// Closed after being open; code from the peer's close frame when there was one.
    case closed(code: Int?)
    /// We closed it (shutdown, timeout or ``WebSocketRuntime/close(_:)``).
    case closedLocally

    public var description: String {
        switch self {
        case .dns(let detail): "DNS: \(detail)"
        case .connect(let detail): "connect: \(detail)"
        case .closed(let code): code.map { "closed by peer (\($0))" } ?? "connection closed"
        case .closedLocally: "closed locally"
        }
    }
}

/// What the runtime reports, on its loop thread.
public enum WebSocketEvent: Sendable {
    /// The upgrade completed. `serverDate`: the server's clock from the answer's `Date` header (Unix seconds, 1 s
    /// resolution), nil when it sent none or none that parses.
    case opened(ConnectionID, serverDate: Int64? = nil)
    /// One complete text message (reassembled from fragments).
    case text(ConnectionID, [UInt8])
    /// A message larger than the configured limit was discarded while reassembling (counted, not parsed).
    case oversizedMessage(ConnectionID, bytes: Int)
    /// The peer answered a PING (ours from ``WebSocketRuntime/ping(_:)`` or lws's idle ping): it is alive.
    case pong(ConnectionID)
    /// The connection is gone; no more events for this id.
    case ended(ConnectionID, WebSocketFailure)
    /// The deadline armed with ``WebSocketRuntime/scheduleTimer(at:)`` passed.
    case timer
}
