/// Normalises one relay address from the directory CSV to its stored form `host` or `host:port`
/// (NOSTR-GEO §3.2, the iOS `GeoRelayDirectory` rules): the URL is always rebuilt as `wss://` + that form.
public enum RelayAddress {
    public enum Limits {
        /// DNS name length limit (RFC 1035).
        public static let maxHostLength = 253
        /// DNS label length limit (RFC 1035).
        public static let maxLabelLength = 63
    }

    /// Why an address was rejected.
    public enum Rejection: Error, Equatable, Sendable, CustomStringConvertible {
        case empty
        case scheme(String)
        case userInfo
        case queryOrFragment
        case path(String)
        case nonASCIIHost
        case hostLength(Int)
        case trailingDot
        case localName(String)
        case tooFewLabels
        case numericHost
        case badLabel(String)
        case badPort(String)

        public var description: String {
            switch self {
            case .empty: "empty address"
            case .scheme(let s): "scheme '\(s)' is not wss or https"
            case .userInfo: "user/password in address"
            case .queryOrFragment: "query or fragment in address"
            case .path(let p): "path '\(p)' (only empty or '/' allowed)"
            case .nonASCIIHost: "host is not ASCII"
            case .hostLength(let n): "host is \(n) characters (max \(Limits.maxHostLength))"
            case .trailingDot: "host ends with '.'"
            case .localName(let h): "'\(h)' is a local-only name"
            case .tooFewLabels: "host needs at least two labels"
            case .numericHost: "numeric host (IP addresses are not allowed)"
            case .badLabel(let l): "invalid host label '\(l)'"
            case .badPort(let p): "invalid port '\(p)'"
            }
        }
    }

    /// The normalised `host[:port]` (port 443 dropped, host lowercased).
    public static func normalize(_ raw: String) throws(Rejection) -> String {
        var text = raw.trimmingASCIIWhitespace()
        guard !text.isEmpty else { throw .empty }
        let parts = text.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2 {
            let scheme = parts[0].lowercased()
            guard scheme == "wss" || scheme == "https" else { throw .scheme(scheme) }
            text = String(parts[1])
        }
        guard !text.contains("?"), !text.contains("#") else { throw .queryOrFragment }
        guard !text.contains("@") else { throw .userInfo }
        var authority = text
        if let slash = text.firstIndex(of: "/") {
            let path = String(text[slash...])
            guard path == "/" else { throw .path(path) }
            authority = String(text[..<slash])
        }
        var host = authority
        var port: String?
        if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            port = String(authority[authority.index(after: colon)...])
        }
        guard host.unicodeScalars.allSatisfy({ $0.isASCII }) else { throw .nonASCIIHost }
        host = host.lowercased()
        guard !host.isEmpty, host.utf8.count <= Limits.maxHostLength else { throw .hostLength(host.utf8.count) }
        guard !host.hasSuffix(".") else { throw .trailingDot }
        if host == "localhost" || host.hasSuffix(".localhost") || host.hasSuffix(".local")
            || host.hasSuffix(".internal")
        {
            throw .localName(host)
        }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { throw .tooFewLabels }
        for label in labels {
            guard (1...Limits.maxLabelLength).contains(label.utf8.count),
                label.utf8.allSatisfy({ isLowerAlphanumeric($0) || $0 == UInt8(ascii: "-") }),
                label.first != "-", label.last != "-"
            else { throw .badLabel(String(label)) }
        }
        guard !labels.allSatisfy({ $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }) else { throw .numericHost }
        guard let port else { return host }
        guard !port.isEmpty, port.utf8.count <= 5, port.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let number = Int(port), (1...65535).contains(number)
        else { throw .badPort(port) }
        return number == 443 ? host : "\(host):\(number)"
    }

    private static func isLowerAlphanumeric(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39)
    }
}

extension StringProtocol {
    /// Removes leading and trailing spaces, tabs, CR and LF (ASCII only: the CSV is ASCII where it matters).
    func trimmingASCIIWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}
