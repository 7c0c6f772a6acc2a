import BotSupport
import Console
import Foundation
import Testing
import WebSocketRuntime

@Suite("Console access: token, sessions, same-origin (CSRF)")
struct ConsoleAccessTests {
    static let token = String(repeating: "ab", count: 32)
    static let now = 1_750_000_000.0

    static func request(
        _ method: String, _ path: String, origin: String? = "http://127.0.0.1:9477", bearer: String? = nil, cookie: String? = nil,
        body: String = "", host: String = "127.0.0.1:9477", referer: String? = nil
    ) -> HTTPRequest {
        var headers: [(name: String, value: String)] = [("host", host)]
        if let origin { headers.append(("origin", origin)) }
        if let referer { headers.append(("referer", referer)) }
        if let bearer { headers.append(("authorization", "Bearer " + bearer)) }
        if let cookie { headers.append(("cookie", cookie)) }
        return HTTPRequest(method: method, path: path, headers: headers, body: Array(body.utf8), remoteAddress: "127.0.0.1")
    }

    func refusal(_ result: Result<ConsoleAccess.Principal, ConsoleAccess.Refusal>) -> ConsoleAccess.Refusal? {
        if case .failure(let r) = result { return r }
        return nil
    }

    @Test func readsAreOpenOnLoopbackAndNeedAuthBeyondIt() throws {
        let open = ConsoleAccess(settings: .init(token: Self.token, readsNeedAuth: false))
        #expect(try open.check(Self.request("GET", "/api/modlog", origin: nil), now: Self.now).get() == .anonymous)
        let closed = ConsoleAccess(settings: .init(token: Self.token, readsNeedAuth: true))
        #expect(refusal(closed.check(Self.request("GET", "/api/modlog", origin: nil), now: Self.now))?.status == 401)
        #expect(try closed.check(Self.request("GET", "/api/modlog", origin: nil, bearer: Self.token), now: Self.now).get() == .bearer(Moderators.operatorName))
    }

    @Test func aStateChangeNeedsTheTokenAndTheSameOrigin() throws {
        let access = ConsoleAccess(settings: .init(token: Self.token, readsNeedAuth: false))
        let path = "/api/senders/nostr:00/block"
        // No token at all.
        #expect(refusal(access.check(Self.request("POST", path), now: Self.now))?.status == 401)
        // A wrong token, and one that is a prefix of the right one.
        #expect(refusal(access.check(Self.request("POST", path, bearer: "ab"), now: Self.now))?.status == 401)
        #expect(refusal(access.check(Self.request("POST", path, bearer: String(Self.token.dropLast())), now: Self.now))?.status == 401)
        // The right token from another origin: refused even with the bearer token (a page elsewhere cannot borrow it).
        let cross = refusal(access.check(Self.request("POST", path, origin: "http://evil.example", bearer: Self.token), now: Self.now))
        #expect(cross?.status == 403 && cross?.reason.contains("cross-origin") == true)
        #expect(refusal(access.check(Self.request("POST", path, origin: "http://127.0.0.1:9478", bearer: Self.token), now: Self.now))?.status == 403)
        #expect(refusal(access.check(Self.request("POST", path, origin: nil, bearer: Self.token, referer: "http://evil.example/x"), now: Self.now))?.status == 403)
        // Same origin (Origin, or Referer when Origin is absent), or a script without either header but with the token.
        #expect(try access.check(Self.request("POST", path, bearer: Self.token), now: Self.now).get() == .bearer(Moderators.operatorName))
        #expect(try access.check(Self.request("POST", path, origin: nil, bearer: Self.token, referer: "http://127.0.0.1:9477/console"), now: Self.now).get() == .bearer(Moderators.operatorName))
        #expect(try access.check(Self.request("POST", path, origin: nil, bearer: Self.token), now: Self.now).get() == .bearer(Moderators.operatorName))
        // "Referer: http://127.0.0.1:94770/" is not the origin http://127.0.0.1:9477.
        #expect(refusal(access.check(Self.request("POST", path, origin: nil, bearer: Self.token, referer: "http://127.0.0.1:94770/"), now: Self.now))?.status == 403)
    }

    @Test func withoutATokenFileNothingChanges() {
        let access = ConsoleAccess(settings: .init(token: nil, readsNeedAuth: false))
        let refused = refusal(access.check(Self.request("POST", "/api/senders/nostr:00/block", bearer: ""), now: Self.now))
        #expect(refused?.status == 403 && refused?.reason.contains("console-token") == true)
    }

    @Test func loginTradesTheTokenForASessionThatExpiresAndNeedsTheOrigin() throws {
        var access = ConsoleAccess(settings: .init(token: Self.token, readsNeedAuth: true))
        var counter: UInt8 = 0
        let random: (Int) -> [UInt8] = { n in counter &+= 1; return [UInt8](repeating: counter, count: n) }
        #expect(throws: ConsoleAccess.Refusal.self) {
            try access.login(Self.request("POST", "/console/login", body: "token=wrong"), now: Self.now, random: random).get()
        }
        #expect(throws: ConsoleAccess.Refusal.self) {
            try access.login(Self.request("POST", "/console/login", origin: "http://evil.example", body: "token=\(Self.token)"), now: Self.now, random: random).get()
        }
        #expect(access.sessionCount == 0)
        let (id, name) = try access.login(Self.request("POST", "/console/login", body: "token=\(Self.token)"), now: Self.now, random: random).get()
        #expect(id == String(repeating: "01", count: 32) && name == Moderators.operatorName)
        let cookie = "other=1; \(ConsoleAccess.cookieName)=\(id)"
        let action = "/api/senders/nostr:00/block"
        #expect(try access.check(Self.request("POST", action, cookie: cookie), now: Self.now + 60).get() == .session(Moderators.operatorName))
        #expect(try access.check(Self.request("GET", "/api/audit", origin: nil, cookie: cookie), now: Self.now + 60).get() == .session(Moderators.operatorName))
        // The cookie alone, without an Origin: refused (a browser always sends Origin on POST).
        #expect(refusal(access.check(Self.request("POST", action, origin: nil, cookie: cookie), now: Self.now + 60))?.status == 403)
        #expect(refusal(access.check(Self.request("POST", action, origin: "http://evil.example", cookie: cookie), now: Self.now))?.status == 403)
        // Expired, and a made-up session.
        #expect(refusal(access.check(Self.request("POST", action, cookie: cookie), now: Self.now + ConsoleAccess.Limits.sessionSeconds))?.status == 401)
        #expect(refusal(access.check(Self.request("POST", action, cookie: "\(ConsoleAccess.cookieName)=\(String(repeating: "02", count: 32))"), now: Self.now))?.status == 401)
        access.logout(Self.request("POST", "/console/logout", cookie: cookie))
        #expect(refusal(access.check(Self.request("POST", action, cookie: cookie), now: Self.now + 60))?.status == 401)
        #expect(ConsoleAccess.sessionCookie(id).contains("HttpOnly") && ConsoleAccess.sessionCookie(id).contains("SameSite=Strict"))
    }

    /// Issue 35: one token shared by everyone — the audit could not tell two moderators apart, and removing one person
    /// signed everyone out.
    @Test("each moderator's own token names them; removing one ends only that person's sessions, the others stay signed in")
    func aNameForEveryModerator() throws {
        let ana = String(repeating: "a1", count: 32), ben = String(repeating: "b2", count: 32)
        var access = ConsoleAccess(settings: .init(token: Self.token, readsNeedAuth: false, moderators: ["ana": ana, "ben": ben]))
        var counter: UInt8 = 0
        let random: (Int) -> [UInt8] = { n in counter &+= 1; return [UInt8](repeating: counter, count: n) }
        let anaSession = try access.login(Self.request("POST", "/console/login", body: "token=\(ana)"), now: Self.now, random: random).get()
        let benSession = try access.login(Self.request("POST", "/console/login", body: "token=\(ben)"), now: Self.now, random: random).get()
        #expect(anaSession.name == "ana" && benSession.name == "ben")
        let action = "/api/senders/nostr:00/block"
        func check(_ id: String) -> Result<ConsoleAccess.Principal, ConsoleAccess.Refusal> {
            access.check(Self.request("POST", action, cookie: "\(ConsoleAccess.cookieName)=\(id)"), now: Self.now + 60)
        }
        #expect(try check(anaSession.id).get().rawValue == "session:ana")
        #expect(try check(benSession.id).get().rawValue == "session:ben")
        #expect(try access.check(Self.request("POST", action, bearer: ben), now: Self.now).get().rawValue == "bearer:ben")
        // Ana is removed: her session and her token stop; Ben and the operator stay signed in.
        access.setCredentials(token: Self.token, moderators: ["ben": ben])
        #expect(refusal(check(anaSession.id))?.status == 401)
        #expect(refusal(access.check(Self.request("POST", action, bearer: ana), now: Self.now))?.status == 401)
        #expect(try check(benSession.id).get() == .session("ben"))
        // Moderators alone, without the operator's console-token, can act.
        var crew = ConsoleAccess(settings: .init(token: nil, readsNeedAuth: false, moderators: ["ben": ben]))
        #expect(try crew.check(Self.request("POST", action, bearer: ben), now: Self.now).get() == .bearer("ben"))
        #expect(try crew.login(Self.request("POST", "/console/login", body: "token=\(ben)"), now: Self.now, random: random).get().name == "ben")
    }

    @Test func sessionsAreBounded() throws {
        var access = ConsoleAccess(settings: .init(token: Self.token, readsNeedAuth: false))
        var n: UInt32 = 0
        let random: (Int) -> [UInt8] = { count in
            n += 1
            return (0..<count).map { UInt8(truncatingIfNeeded: n >> (8 * ($0 % 4))) }
        }
        for _ in 0..<(ConsoleAccess.Limits.maxSessions + 10) {
            _ = try access.login(Self.request("POST", "/console/login", body: "token=\(Self.token)"), now: Self.now, random: random).get()
        }
        #expect(access.sessionCount == ConsoleAccess.Limits.maxSessions)
    }

    @Test func constantTimeCompareAndFormDecoding() {
        #expect(ConsoleAccess.constantTimeEqual("abc", "abc"))
        #expect(!ConsoleAccess.constantTimeEqual("abc", "abd"))
        #expect(!ConsoleAccess.constantTimeEqual("abc", "abcd"))
        #expect(!ConsoleAccess.constantTimeEqual("", "a"))
        #expect(FormData.parse("a=1&b=two+words&c=%C3%A9&d&e=%ZZ") == ["a": "1", "b": "two words", "c": "é", "d": ""])
    }
}
