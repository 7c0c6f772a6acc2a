import BotSupport
import BridgeTestSupport
import Foundation
import Testing

@Suite("bitchat-bridge console-token and the console on a running bridge", .serialized)
struct ConsoleRunTests {
    @Test("a listener beyond loopback without the token exits 64 naming http_listen; console-token makes it (0600) and run gets past")
    func beyondLoopbackNeedsTheToken() async throws {
        let data = TestEnvironment.temporaryDirectory("console-token") + "/data"
        let environment = RunStartTests.environment(data, ["BRIDGE_HTTP_LISTEN": "0.0.0.0:\(LoopbackPort.free())"])
        let refused = try await runBridge(["run"], environment: environment)
        #expect(refused.status == 64, "\(refused.stderr)")
        #expect(refused.stderr.contains("http_listen") && refused.stderr.contains("console-token"), "\(refused.stderr)")
        #expect(!FileIO.exists(data + "/console-token"))
        let made = try await runBridge(["console-token", "--data-dir", data])
        #expect(made.status == 0, "\(made.stderr)")
        let token = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.count == 64 && token.allSatisfy(\.isHexDigit))
        #expect(try FileIO.permissions(data + "/console-token") == 0o600)
        #expect(made.stderr.contains("wrote") && !made.stderr.contains(token))
        let again = try await runBridge(["console-token", "--data-dir", data])
        #expect(again.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == token && !again.stderr.contains("wrote"))
        let rotated = try await runBridge(["console-token", "--data-dir", data, "--rotate"])
        #expect(rotated.stdout.trimmingCharacters(in: .whitespacesAndNewlines) != token)
        // With the token, run passes the check and fails later, on the absent mesh hub (exit 1, not 64).
        let started = try await runBridge(["run"], environment: environment)
        #expect(started.status == 1, "\(started.stderr)")
        #expect(!started.stderr.contains(rotated.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "the token is never logged")
        // A token file others can read is refused, whatever the listener.
        chmod(data + "/console-token", 0o644)
        let open = try await runBridge(["run"], environment: RunStartTests.environment(data))
        #expect(open.status == 64 && open.stderr.contains("mode 644"), "\(open.stderr)")
    }

    @Test("sign-in follows the token file: made after start it works at once, a rotation ends the old sessions; console-token says which bridge it reaches; the console URL is logged")
    func tokenFollowed() async throws {
        let directory = TestEnvironment.temporaryDirectory("console-follow")
        let data = directory + "/data"
        let (hub, hubPort) = try await RunStartTests.radioHub()
        defer { hub.stop() }
        let httpPort = LoopbackPort.free()
        let bridge = try ChildProcess(
            TestEnvironment.bridgeExecutable, ["run"],
            environment: RunStartTests.environment(data, ["BRIDGE_MESH": "tcp://127.0.0.1:\(hubPort)", "BRIDGE_HTTP_LISTEN": "127.0.0.1:\(httpPort)"]),
            name: "bridge")
        defer { bridge.stop() }
        let logged = try await bridge.waitForLine(stderr: true, "console URL") { $0.contains("console listening") }
        let base = "http://127.0.0.1:\(httpPort)"
        #expect(logged.contains("\(base)/console"), "\(logged)")
        let origin = ["Origin": base]
        let none = try await ConsoleFetch.run("\(base)/console/login", method: "POST", headers: origin, body: "token=" + String(repeating: "0", count: 64))
        #expect(none.status == 403, "\(none.body)")

        let made = try await runBridge(["console-token", "--data-dir", data])
        #expect(made.stderr.contains("(PID \(bridge.pid)) uses it at once"), "\(made.stderr)")
        let token = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let login = try await ConsoleFetch.run("\(base)/console/login", method: "POST", headers: origin, body: "token=\(token)")
        #expect(login.status == 200, "made after start: \(login.body)")
        let cookie = String(try #require(login.headers["set-cookie"]).split(separator: ";")[0])

        let rotated = try await runBridge(["console-token", "--data-dir", data, "--rotate"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let action = "\(base)/api/senders/nostr:\(String(repeating: "42", count: 32))/block"
        let oldSession = try await ConsoleFetch.run(action, method: "POST", headers: origin.merging(["Cookie": cookie]) { $1 })
        #expect(oldSession.status == 401, "a session of the old token: \(oldSession.body)")
        let oldToken = try await ConsoleFetch.run(action, method: "POST", headers: origin.merging(["Authorization": "Bearer \(token)"]) { $1 })
        #expect(oldToken.status == 401, "\(oldToken.body)")
        let newToken = try await ConsoleFetch.run(action, method: "POST", headers: origin.merging(["Authorization": "Bearer \(rotated)"]) { $1 })
        #expect(newToken.status == 200, "\(newToken.body)")

        let elsewhere = try await runBridge(["console-token", "--data-dir", directory + "/elsewhere"])
        #expect(elsewhere.status == 0 && elsewhere.stderr.contains("no bridge is running on the data directory \(directory)/elsewhere"), "\(elsewhere.stderr)")
        #expect(!bridge.transcript.contains(token) && !bridge.transcript.contains(rotated), "the token is never logged")
    }

    @Test("on a running bridge: a POST without the token or from another origin is refused and changes nothing; with both, the block reaches the coordinator")
    func consoleOnARunningBridge() async throws {
        let directory = TestEnvironment.temporaryDirectory("console-run")
        let data = directory + "/data"
        let token = try await runBridge(["console-token", "--data-dir", data]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let (hub, hubPort) = try await RunStartTests.radioHub()
        defer { hub.stop() }
        let httpPort = LoopbackPort.free()
        let bridge = try ChildProcess(
            TestEnvironment.bridgeExecutable, ["run"],
            environment: RunStartTests.environment(data, [
                "BRIDGE_MESH": "tcp://127.0.0.1:\(hubPort)", "BRIDGE_HTTP_LISTEN": "127.0.0.1:\(httpPort)", "BRIDGE_LOG_LEVEL": "info",
            ]), name: "bridge")
        defer { bridge.stop() }
        try await bridge.waitForLine(stderr: true, "bridge starting") { $0.contains("bridge starting") }
        let base = "http://127.0.0.1:\(httpPort)"
        let origin = ["Origin": base]
        let key = "nostr:" + String(repeating: "42", count: 32)
        let action = "\(base)/api/senders/\(key)/block"
        var page = try await ConsoleFetch.run("\(base)/console")
        for _ in 0..<100 where page.status != 200 {
            try await Task.sleep(for: .milliseconds(100))
            page = try await ConsoleFetch.run("\(base)/console")
        }
        #expect(page.status == 200 && page.body.contains("bitchat-bridge console"))
        #expect(page.headers["content-security-policy"]?.contains("default-src 'self'") == true)
        #expect(!page.body.contains(token))
        #expect(try await ConsoleFetch.run("\(base)/metrics").body.contains("bitchat_bridge_uptime_seconds"))

        let noToken = try await ConsoleFetch.run(action, method: "POST", headers: origin)
        #expect(noToken.status == 401, "\(noToken.body)")
        let crossOrigin = try await ConsoleFetch.run(
            action, method: "POST", headers: ["Origin": "http://evil.example", "Authorization": "Bearer \(token)"])
        #expect(crossOrigin.status == 403, "\(crossOrigin.body)")
        let forged = try await ConsoleFetch.run(action, method: "POST", headers: origin.merging(["Cookie": "bb_session=00"]) { $1 })
        #expect(forged.status == 401)
        #expect(try await ConsoleFetch.run("\(base)/api/senders/\(key)").json?["known"] == .bool(false), "nothing changed")

        let done = try await ConsoleFetch.run(action, method: "POST", headers: origin.merging(["Authorization": "Bearer \(token)"]) { $1 })
        #expect(done.status == 200, "\(done.body)")
        #expect(try await ConsoleFetch.run("\(base)/api/senders/\(key)").json?["blocked"] == .bool(true))
        // The coordinator reloads its block list from the row (SQLite data_version), the path `identities block` takes.
        let loaded = try await bridge.waitForLine(stderr: true, timeout: .seconds(10), "block list loaded") {
            $0.contains("block list loaded") && $0.contains("\"block.keys\":1")
        }
        #expect(!loaded.isEmpty)
        // One connection per database file: the console reads and writes on the bridge's own (issue 15), so the
        // process holds bridge.sqlite3 open once (a second connection would be a second descriptor).
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(bridge.pid)/fd")) ?? []
        let databaseOpens = descriptors.filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(bridge.pid)/fd/\($0)"))?.hasSuffix("/bridge.sqlite3") == true
        }
        #expect(databaseOpens.count == 1, "bridge.sqlite3 open \(databaseOpens.count) times")

        // A browser: sign in (token → session cookie), act with the cookie and its own Origin.
        let login = try await ConsoleFetch.run("\(base)/console/login", method: "POST", headers: origin, body: "token=\(token)")
        #expect(login.status == 200)
        let cookie = try #require(login.headers["set-cookie"]).split(separator: ";")[0]
        let unblock = try await ConsoleFetch.run(
            "\(base)/api/senders/\(key)/unblock", method: "POST", headers: origin.merging(["Cookie": String(cookie)]) { $1 })
        #expect(unblock.status == 200)

        let audit = try #require(try await ConsoleFetch.run("\(base)/api/audit").json?["entries"]?.arrayValue)
        #expect(audit.map { $0["outcome"]?.stringValue?.prefix(7) ?? "" } == ["ok", "ok", "ok", "refused", "refused", "refused"])
        #expect(audit.map { $0["action"]?.stringValue ?? "" } == ["unblock", "login", "block", "block", "block", "block"])
        #expect(audit.allSatisfy { $0["remote"] == .string("127.0.0.1") })
        #expect(!bridge.transcript.contains(token), "the token is never logged")
    }
}
