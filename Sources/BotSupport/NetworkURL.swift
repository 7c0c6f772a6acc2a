#if canImport(Glibc)
import Glibc
#endif

/// A `scheme://host[:port][/path][?query]` URL as operators write the bridge's addresses (relays `ws://`,
/// `wss://`; radio hubs `tcp://`), checked strictly and once, so the configuration and the runtime that
/// connects agree on what is a usable URL and every refusal says what is wrong.
///
/// Accepted hosts: a DNS name (ASCII letters, digits, `-`, `_`, dot-separated non-empty labels), an IPv4
/// literal, or an IPv6 literal in brackets (`[::1]`, RFC 3986 §3.2.2). Refused: user info (`user@`), a
/// fragment (`#…`, RFC 6455 §3 forbids it for WebSocket URIs), spaces or control characters anywhere,
/// ports outside 1…65535.
public struct NetworkURL: Sendable, Equatable {
    public enum Limits {
        /// A DNS name's longest text form (RFC 1035 §2.3.4).
        public static let maxHostLength = 253
        /// Highest TCP port.
        public static let maxPort = 65_535
    }

    /// Lowercased scheme, one of those the caller allowed.
    public let scheme: String
    /// Lowercased host; an IPv6 literal without its brackets.
    public let host: String
    /// The explicit port, or nil when the URL has none.
    public let port: Int?
    /// Everything after the authority (`/path?query`), possibly empty.
    public let pathAndQuery: String

    /// True for an IPv6 literal host (written in brackets in a URL and in a `Host:` header).
    public var isIPv6: Bool { host.contains(":") }

    /// The host as it appears in a URL or a `Host:` header: IPv6 literals in brackets.
    public var hostForURL: String { isIPv6 ? "[\(host)]" : host }

    /// Parses `text`, whose scheme must be one of `schemes` (lowercase, without `://`).
    public static func parse(_ text: String, schemes: [String]) throws(NetworkURLError) -> NetworkURL {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { throw .scheme(expected: schemes) }
        let scheme = text[..<colon].lowercased()
        guard schemes.contains(scheme) else { throw .scheme(expected: schemes) }
        let rest = text[text.index(colon, offsetBy: 3)...]
        if let bad = rest.unicodeScalars.first(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
            throw .forbiddenCharacter(bad.value == 0x20 ? "a space" : "control character U+\(String(bad.value, radix: 16, uppercase: true))")
        }
        guard !rest.contains("#") else { throw .fragment }
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        let (host, port) = try hostAndPort(String(authority), allowPortZero: false, requirePort: false)
        return NetworkURL(scheme: scheme, host: host, port: port, pathAndQuery: String(rest.dropFirst(authority.count)))
    }

    /// Splits `host[:port]` / `[v6]:port` (an authority, or a listen address such as `127.0.0.1:9477`).
    /// `requirePort` makes a missing port an error; `allowPortZero` accepts 0 ("the kernel picks").
    public static func hostAndPort(_ authority: String, allowPortZero: Bool, requirePort: Bool)
        throws(NetworkURLError) -> (host: String, port: Int?)
    {
        guard !authority.isEmpty else { throw .noHost }
        guard !authority.contains("@") else { throw .userInfo }
        let hostText: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .invalidHost(authority, reason: "no closing ']'") }
            hostText = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw .invalidHost(authority, reason: "'\(after)' after the ']'")
            }
            var address = in6_addr()
            guard inet_pton(AF_INET6, String(hostText), &address) == 1 else {
                throw .invalidHost(String(hostText), reason: "not an IPv6 address")
            }
        } else {
            if let colon = authority.firstIndex(of: ":") {
                hostText = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
                if portText?.contains(":") == true {
                    throw .invalidHost(authority, reason: "an IPv6 address must be written in brackets, e.g. [::1]")
                }
            } else {
                hostText = Substring(authority)
            }
            try checkName(hostText)
        }
        guard !hostText.isEmpty else { throw .noHost }
        var port: Int?
        if let portText {
            guard !portText.isEmpty, portText.utf8.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                let value = Int(portText), (allowPortZero ? 0 : 1)...Limits.maxPort ~= value
            else { throw .invalidPort(String(portText), allowZero: allowPortZero) }
            port = value
        } else if requirePort {
            throw .missingPort
        }
        return (hostText.lowercased(), port)
    }

    /// A DNS name or IPv4 literal: ASCII letters, digits, `-` and `_`, in non-empty dot-separated labels.
    private static func checkName(_ name: Substring) throws(NetworkURLError) {
        guard !name.isEmpty else { throw .noHost }
        guard name.utf8.count <= Limits.maxHostLength else {
            throw .invalidHost(String(name.prefix(32)) + "…", reason: "longer than \(Limits.maxHostLength) characters")
        }
        if let bad = name.first(where: { !($0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".")) }) {
            throw .invalidHost(String(name), reason: "'\(bad)' is not allowed in a host name")
        }
        guard !name.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) else {
            throw .invalidHost(String(name), reason: "empty label")
        }
    }
}

/// Why a URL was refused (its description is the reason, without the URL: callers name URL and field).
public enum NetworkURLError: Error, Equatable, Sendable, CustomStringConvertible {
    case scheme(expected: [String])
    case noHost
    case userInfo
    case fragment
    case forbiddenCharacter(String)
    case invalidHost(String, reason: String)
    case invalidPort(String, allowZero: Bool)
    case missingPort

    public var description: String {
        switch self {
        case .scheme(let expected): "the scheme must be " + expected.map { "\($0)://" }.joined(separator: " or ")
        case .noHost: "no host"
        case .userInfo: "user info (user@ or user:password@) is not allowed"
        case .fragment: "a fragment (#…) is not allowed"
        case .forbiddenCharacter(let what): "\(what) is not allowed in a URL (percent-encode it)"
        case .invalidHost(let host, let reason): "host '\(host)': \(reason)"
        case .invalidPort(let text, let allowZero):
            "port '\(text)' is not a whole number from \(allowZero ? 0 : 1) to \(NetworkURL.Limits.maxPort)"
        case .missingPort: "no port (HOST:PORT)"
        }
    }
}
