public import WebSocketRuntime

/// Who may use the console and how (issue 18 "Access"), as a pure value: time and randomness come in.
///
/// - Reads (`GET`/`HEAD`) are open on a loopback listener, as `/healthz` and `/metrics` always were; on a
///   listener beyond loopback they need a session or the token (``Settings/readsNeedAuth``).
/// - Every state-changing request (`POST`, `PUT`, `PATCH`, `DELETE`) needs **both**:
///   1. the token — as `Authorization: Bearer <token>` (scripts), or a session cookie the browser got by
///      posting the token once to `/console/login`; and
///   2. same origin (CSRF): its `Origin` (else `Referer`) must be this listener's own `http(s)://<Host>`.
///      A request that carries neither header is accepted only with the bearer token: browsers send `Origin`
///      on every POST, so a header-less request is not a browser being tricked, and a cookie alone never
///      authorises it.
/// - With no token file and no moderator, nothing changes state: the console says to run `bitchat-bridge console-token`.
/// - Each moderator has a token of their own (``Moderators``, issue 35); the operator's `console-token` signs in as
///   `operator`. A request's ``Principal`` names the person, and removing one ends only that person's sessions.
public struct ConsoleAccess: Sendable {
    public enum Limits {
        /// A browser session lasts this long, seconds (a moderator's shift); then the token is asked again.
        public static let sessionSeconds = 12.0 * 3600
        /// Sessions held at once; the oldest goes first (bounds memory against a login loop).
        public static let maxSessions = 64
        /// Random bytes in a session id.
        public static let sessionBytes = 32
    }

    public struct Settings: Sendable, Equatable {
        /// The console token, nil when `<data-dir>/console-token` does not exist.
        public var token: String?
        /// True on a listener beyond loopback: reading the console needs a session or the token too.
        public var readsNeedAuth: Bool
        /// Each moderator's own token, by name (``Moderators/tokens``).
        public var moderators: [String: String]

        public init(token: String?, readsNeedAuth: Bool, moderators: [String: String] = [:]) {
            self.token = token
            self.readsNeedAuth = readsNeedAuth
            self.moderators = moderators
        }

        /// Whether anyone can sign in.
        public var anyCredential: Bool { token != nil || !moderators.isEmpty }

        /// Whose token `offered` is: `operator` for the console token, else the moderator's name.
        func who(_ offered: String) -> String? {
            if let token, ConsoleAccess.constantTimeEqual(offered, token) { return Moderators.operatorName }
            return moderators.first { ConsoleAccess.constantTimeEqual(offered, $0.value) }?.key
        }
    }

    /// Why a request was refused: the HTTP status and the reason given back (and audited).
    public struct Refusal: Error, Sendable, Equatable {
        public let status: Int
        public let reason: String
    }

    /// How a request proved itself, and who it is (issue 35: the audit named no one).
    public struct Principal: Sendable, Equatable {
        public enum Kind: String, Sendable {
            case anonymous
            case bearer
            case session
        }

        public let kind: Kind
        /// The moderator (``Moderators``), `operator` for the console token; nil when anonymous.
        public let name: String?

        public static let anonymous = Principal(kind: .anonymous, name: nil)
        public static func bearer(_ name: String) -> Principal { Principal(kind: .bearer, name: name) }
        public static func session(_ name: String) -> Principal { Principal(kind: .session, name: name) }

        /// As the audit writes it: `session:ana`, `bearer:operator`, `anonymous`.
        public var rawValue: String { name.map { "\(kind.rawValue):\($0)" } ?? kind.rawValue }
    }

    public static let cookieName = "bb_session"

    public private(set) var settings: Settings
    /// Session id → its end and whose it is.
    private var sessions: [String: (expiry: Double, name: String)] = [:]
    private var order: [String] = []

    public init(settings: Settings) { self.settings = settings }

    /// The tokens as the files now hold them (made, rotated or removed after start): a person whose token changed or
    /// went has their sessions ended — they were signed in with the old one; everyone else stays signed in.
    public mutating func setCredentials(token: String?, moderators: [String: String]) {
        var changed: Set<String> = []
        if token != settings.token { changed.insert(Moderators.operatorName) }
        for name in Set(moderators.keys).union(settings.moderators.keys) where moderators[name] != settings.moderators[name] {
            changed.insert(name)
        }
        settings.token = token
        settings.moderators = moderators
        guard !changed.isEmpty else { return }
        sessions = sessions.filter { !changed.contains($0.value.name) }
        order.removeAll { sessions[$0] == nil }
    }

    public static func isStateChanging(_ method: String) -> Bool { ["POST", "PUT", "PATCH", "DELETE"].contains(method) }

    /// The verdict on `request` at `now` (Unix seconds). Login requests are checked by ``login(_:now:random:)``.
    public func check(_ request: HTTPRequest, now: Double) -> Result<Principal, Refusal> {
        let bearer = bearerName(request).map(Principal.bearer)
        let session = sessionName(request, now: now).map(Principal.session)
        guard Self.isStateChanging(request.method) else {
            if !settings.readsNeedAuth { return .success(bearer ?? session ?? .anonymous) }
            if let who = bearer ?? session { return .success(who) }
            return .failure(Refusal(status: 401, reason: "sign in with the console token (this listener is beyond loopback)"))
        }
        guard settings.anyCredential else {
            return .failure(Refusal(status: 403, reason: "no console token: run bitchat-bridge console-token on the bridge's host"))
        }
        if let refusal = originRefusal(request, bearer: bearer != nil) { return .failure(refusal) }
        if let who = bearer ?? session { return .success(who) }
        return .failure(Refusal(status: 401, reason: "the console token is needed (Authorization: Bearer, or sign in)"))
    }

    /// A login (`POST /console/login`, form `token=…`): same origin, then the token; a new session id, and whose it is,
    /// on success.
    public mutating func login(_ request: HTTPRequest, now: Double, random: (Int) -> [UInt8]) -> Result<(id: String, name: String), Refusal> {
        guard settings.anyCredential else {
            return .failure(Refusal(status: 403, reason: "no console token: run bitchat-bridge console-token on the bridge's host"))
        }
        if let refusal = originRefusal(request, bearer: false) { return .failure(refusal) }
        let offered = FormData.parse(request.body)["token"] ?? ""
        guard let name = settings.who(offered) else { return .failure(Refusal(status: 401, reason: "wrong console token")) }
        expire(now: now)
        while order.count >= Limits.maxSessions {
            sessions.removeValue(forKey: order.removeFirst())
        }
        let id = random(Limits.sessionBytes).map { b in String(b, radix: 16).count == 1 ? "0" + String(b, radix: 16) : String(b, radix: 16) }
            .joined()
        sessions[id] = (now + Limits.sessionSeconds, name)
        order.append(id)
        return .success((id, name))
    }

    /// Ends the request's session (logout).
    public mutating func logout(_ request: HTTPRequest) {
        guard let id = Self.cookie(request, Self.cookieName) else { return }
        sessions.removeValue(forKey: id)
        order.removeAll { $0 == id }
    }

    public var sessionCount: Int { sessions.count }

    /// The `Set-Cookie` value for a new session: never readable by scripts, never sent cross-site.
    public static func sessionCookie(_ id: String) -> String {
        "\(cookieName)=\(id); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(Int(Limits.sessionSeconds))"
    }

    public static var clearedCookie: String { "\(cookieName)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0" }

    private mutating func expire(now: Double) {
        let dead = sessions.filter { $0.value.expiry <= now }.map(\.key)
        for id in dead { sessions.removeValue(forKey: id) }
        if !dead.isEmpty { order.removeAll { sessions[$0] == nil } }
    }

    /// Whose bearer token the request carries, if any.
    private func bearerName(_ request: HTTPRequest) -> String? {
        guard let header = request.header("authorization"), header.hasPrefix("Bearer ") else { return nil }
        return settings.who(String(header.dropFirst(7)).trimmingWhitespace())
    }

    /// Whose live session the request's cookie is, if any.
    private func sessionName(_ request: HTTPRequest, now: Double) -> String? {
        guard let id = Self.cookie(request, Self.cookieName), let session = sessions[id], session.expiry > now else { return nil }
        return session.name
    }

    /// Same-origin check (CSRF): nil when the request may go on.
    func originRefusal(_ request: HTTPRequest, bearer: Bool) -> Refusal? {
        guard let host = request.header("host"), !host.isEmpty else {
            return Refusal(status: 403, reason: "no Host header: cannot check the origin")
        }
        let own = ["http://" + host, "https://" + host]
        if let origin = request.header("origin") {
            return own.contains(origin) ? nil : Refusal(status: 403, reason: "cross-origin request refused (Origin \(origin))")
        }
        if let referer = request.header("referer") {
            return own.contains(where: { referer == $0 || referer.hasPrefix($0 + "/") })
                ? nil : Refusal(status: 403, reason: "cross-origin request refused (Referer)")
        }
        return bearer ? nil : Refusal(status: 403, reason: "no Origin or Referer: a browser request must say where it comes from")
    }

    /// Compares in time that depends on the lengths only, not on where the first difference is.
    public static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        var difference = UInt8(truncatingIfNeeded: x.count ^ y.count)
        for i in 0..<max(x.count, y.count) {
            difference |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
        }
        return difference == 0 && x.count == y.count
    }

    /// The value of cookie `name` in the request's `Cookie` header.
    public static func cookie(_ request: HTTPRequest, _ name: String) -> String? {
        guard let header = request.header("cookie") else { return nil }
        for part in header.split(separator: ";") {
            let pair = part.trimmingPrefixSpaces()
            if pair.hasPrefix(name + "=") { return String(pair.dropFirst(name.count + 1)) }
        }
        return nil
    }
}

extension Substring {
    fileprivate func trimmingPrefixSpaces() -> Substring { drop { $0 == " " } }
}

/// `application/x-www-form-urlencoded` and query strings: `a=1&b=two+words&c=%C3%A9`.
public enum FormData {
    public static func parse(_ body: [UInt8]) -> [String: String] { parse(String(decoding: body, as: UTF8.self)) }

    /// Later duplicates win; a key without `=` maps to the empty string; a pair with a broken escape is dropped.
    public static func parse(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = decode(parts[0]) else { continue }
            if parts.count == 1 { out[key] = ""; continue }
            guard let value = decode(parts[1]) else { continue }
            out[key] = value
        }
        return out
    }

    /// Percent-decoding with `+` as space; nil for a broken escape or invalid UTF-8.
    public static func decode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var i = text.utf8.startIndex
        let utf8 = text.utf8
        while i < utf8.endIndex {
            let c = utf8[i]
            if c == UInt8(ascii: "+") {
                bytes.append(32)
            } else if c == UInt8(ascii: "%") {
                let h = utf8.index(after: i)
                guard h < utf8.endIndex, utf8.index(after: h) < utf8.endIndex,
                    let hi = hexValue(utf8[h]), let lo = hexValue(utf8[utf8.index(after: h)])
                else { return nil }
                bytes.append(hi << 4 | lo)
                i = utf8.index(h, offsetBy: 1)
            } else {
                bytes.append(c)
            }
            i = utf8.index(after: i)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: c - 48
        case 65...70: c - 55
        case 97...102: c - 87
        default: nil
        }
    }
}
