import BotSupport
import Bridge
import BridgeTestSupport
import Foundation
import Testing

/// What `bitchat-bridge run` refuses or reports before it bridges anything (issue 14 "Also found", issue 15
/// defect 3), each against the real binary.
@Suite("bitchat-bridge run: start-up checks")
struct RunStartTests {
    /// A port on 127.0.0.1 where nothing listens (so a relay or hub there fails at once).
    static func closedPort() -> Int { LoopbackPort.free() }

    /// The minimal environment of a bridge that reaches no relay and whose mesh hub is down: `run` gets
    /// past the configuration and the key file, then fails to join the mesh (exit 1).
    static func environment(_ data: String, _ extra: [String: String] = [:]) -> [String: String] {
        [
            "BRIDGE_GEOHASH": "u4pruy", "BRIDGE_DATA_DIR": data, "BRIDGE_RELAYS": "ws://127.0.0.1:\(closedPort())",
            "BRIDGE_RELAY_DIRECTORY": "off", "BRIDGE_MESH": "tcp://127.0.0.1:\(closedPort())", "BRIDGE_HTTP_LISTEN": "off",
        ].merging(extra) { $1 }
    }

    /// A radio hub (`radio-hub`) on a port the kernel picks, and that port.
    static func radioHub(_ options: [String] = []) async throws -> (process: ChildProcess, port: Int) {
        let hub = try ChildProcess(TestEnvironment.bridgeExecutable, ["radio-hub", "--listen", "127.0.0.1:0"] + options)
        do {
            let listening = try await hub.waitForLine("hub listening") { $0.contains("\"listening\"") }
            return (hub, Int(try #require(try JSONParser().parse(listening)["port"]?.integerValue)))
        } catch {
            hub.stop()
            throw error
        }
    }

    @Test(
        "a bad relay URL exits 64 naming the field, the URL and the reason",
        arguments: [
            ("ws://relay.example:99999", "port '99999'"), ("ws://relay.example:0", "port '0'"), ("ws://relay.example:-1", "port '-1'"),
            ("ws://relay.example:abc", "port 'abc'"), ("ws://me:secret@relay.example", "user info"), ("ws://a b:1/", "a space"),
        ])
    func badRelayURL(url: String, reason: String) async throws {
        let data = TestEnvironment.temporaryDirectory("run-url")
        let result = try await runBridge(["run"], environment: Self.environment(data, ["BRIDGE_RELAYS": url]))
        #expect(result.status == 64, "\(url): \(result.stderr)")
        #expect(result.stderr.contains("'relays'") && result.stderr.contains(url) && result.stderr.contains(reason), "\(result.stderr)")
    }

    @Test("relay_ca_file: shown by --print-config; empty or unreadable exits 64 naming the field")
    func relayCAFile() async throws {
        let data = TestEnvironment.temporaryDirectory("run-ca")
        let missing = data + "/no-such-ca.pem"
        let printed = try await runBridge(["run", "--print-config"], environment: Self.environment(data, ["BRIDGE_RELAY_CA_FILE": missing]))
        #expect(printed.status == 0 && printed.stdout.contains(missing), "\(printed.stdout)")
        let unreadable = try await runBridge(["run"], environment: Self.environment(data, ["BRIDGE_RELAY_CA_FILE": missing]))
        #expect(unreadable.status == 64 && unreadable.stderr.contains("relay_ca_file") && unreadable.stderr.contains(missing), "\(unreadable.stderr)")
        let empty = try await runBridge(["run"], environment: Self.environment(data, ["BRIDGE_RELAY_CA_FILE": ""]))
        #expect(empty.status == 64 && empty.stderr.contains("relay_ca_file"), "\(empty.stderr)")
    }

    @Test("a misspelt BRIDGE_* variable is warned about, naming the nearest one, at --print-config and at run")
    func misspeltVariable() async throws {
        let data = TestEnvironment.temporaryDirectory("run-typo")
        let environment = Self.environment(data, ["BRIDGE_TEXT_MIROR": "both"])
        let printed = try await runBridge(["run", "--print-config"], environment: environment)
        #expect(printed.status == 0)
        #expect(printed.stderr.contains("BRIDGE_TEXT_MIROR") && printed.stderr.contains("did you mean BRIDGE_TEXT_MIRROR?"), "\(printed.stderr)")
        let run = try await runBridge(["run"], environment: environment)
        let line = try #require(run.stderr.split(separator: "\n").first { $0.contains("BRIDGE_TEXT_MIROR") }, "\(run.stderr)")
        let logged = try JSONParser().parse(String(line))
        #expect(logged["level"] == .string("warning"), "\(line)")
        #expect(logged["env.variable"] == .string("BRIDGE_TEXT_MIROR"))
        // The README's own example: the misspelt geohash leaves the configuration invalid, and the hint still shows.
        var typo = Self.environment(data, ["BRIDGE_GEOHSAH": "u4pruy"])
        typo["BRIDGE_GEOHASH"] = nil
        let invalid = try await runBridge(["run", "--print-config"], environment: typo)
        #expect(invalid.status == 64 && invalid.stderr.contains("'geohash' is required"), "\(invalid.stderr)")
        #expect(invalid.stderr.contains("did you mean BRIDGE_GEOHASH?"), "\(invalid.stderr)")
    }

    @Test("a data directory others can write to stops run and keys with exit 64 naming it and its mode")
    func openDataDirectory() async throws {
        let data = TestEnvironment.temporaryDirectory("run-mode") + "/data"
        try FileIO.makeDirectory(data)
        chmod(data, 0o777)
        for arguments in [["run"], ["keys"], ["identities", "stats"], ["modlog"]] {
            let result = try await runBridge(arguments, environment: Self.environment(data))
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("data directory \(data) has mode 777"), "\(arguments): \(result.stderr)")
        }
        #expect(!FileIO.exists(data + "/keys.json"))
        chmod(data, 0o700)
        #expect(try await runBridge(["keys"], environment: Self.environment(data)).status == 0)
    }

    @Test("a corrupted nostr_seed stops run and keys (exit 1) instead of changing the channel npubs")
    func corruptedSeed() async throws {
        let data = TestEnvironment.temporaryDirectory("run-seed") + "/data"
        #expect(try await runBridge(["keys"], environment: Self.environment(data)).status == 0)
        var text = String(decoding: try FileIO.read(data + "/keys.json"), as: UTF8.self)
        let range = try #require(text.range(of: "\"nostr_seed\": \""))
        text.replaceSubrange(range.upperBound...range.upperBound, with: text[range.upperBound] == "a" ? "b" : "a")
        try FileIO.writeAtomically(Array(text.utf8), to: data + "/keys.json", mode: 0o600)
        for arguments in [["run"], ["keys", "--geohash", "u4pruy"]] {
            let result = try await runBridge(arguments, environment: Self.environment(data))
            #expect(result.status == 1, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("Nostr seed does not match its check value"), "\(arguments): \(result.stderr)")
            #expect(!result.stdout.contains("npub1"))
        }
    }

    @Test("a key file without the seed check value keeps its identity; run logs that it added the check value")
    func seedCheckMigration() async throws {
        let data = TestEnvironment.temporaryDirectory("run-migrate") + "/data"
        let before = try JSONParser().parse(try await runBridge(["keys", "--geohash", "u4pruy", "--json"], environment: Self.environment(data)).stdout)
        let file = try JSONParser().parse(try FileIO.read(data + "/keys.json"))
        let old = JSONValue.object(try #require(file.objectValue).filter { $0.0 != "nostr_seed_check" })
        try FileIO.writeAtomically(Array(JSONWriter.pretty(old).utf8), to: data + "/keys.json", mode: 0o600)
        // run loads the keys, logs the upgrade, then fails to join the (absent) mesh hub.
        let run = try await runBridge(["run"], environment: Self.environment(data))
        #expect(run.status == 1)
        #expect(run.stderr.contains("upgraded: added nostr_seed_check (same identity)"), "\(run.stderr)")
        let after = try JSONParser().parse(try await runBridge(["keys", "--geohash", "u4pruy", "--json"], environment: Self.environment(data)).stdout)
        #expect(after["nostr"]?["channel"]?["npub"] == before["nostr"]?["channel"]?["npub"])
        #expect(after["peer_id"] == before["peer_id"])
        #expect(try JSONParser().parse(try FileIO.read(data + "/keys.json"))["nostr_seed_check"]?.stringValue?.count == 64)
    }

    @Test("one bridge per data directory: a second run exits 1 naming the directory and the PID holding it; the first keeps its control socket; a busy console port names http_listen")
    func oneBridgePerDataDirectory() async throws {
        let data = TestEnvironment.temporaryDirectory("run-lock") + "/data"
        let (hub, port) = try await RunStartTests.radioHub()
        defer { hub.stop() }
        let httpPort = LoopbackPort.free()
        let environment = Self.environment(data, ["BRIDGE_MESH": "tcp://127.0.0.1:\(port)", "BRIDGE_HTTP_LISTEN": "127.0.0.1:\(httpPort)"])
        let first = try ChildProcess(TestEnvironment.bridgeExecutable, ["run"], environment: environment, name: "first")
        defer { first.stop() }
        try await first.waitForLine(stderr: true, "control socket") { $0.contains("control socket listening") }
        let second = try await runBridge(["run"], environment: environment)
        #expect(second.status == 1, "\(second.stderr)")
        #expect(second.stderr.contains("another bridge (PID \(first.pid)) is running on the data directory \(data)"), "\(second.stderr)")
        // The refused bridge removed nothing of the first: its control socket still answers.
        let listed = try await runBridge(["notice", "list"], environment: environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        // A second bridge on its own directory but the first one's console port: the error names the setting.
        let busy = try await runBridge(["run"], environment: Self.environment(data + "-other", [
            "BRIDGE_MESH": "tcp://127.0.0.1:\(port)", "BRIDGE_HTTP_LISTEN": "127.0.0.1:\(httpPort)",
        ]))
        #expect(busy.status == 1 && busy.stderr.contains("http_listen 127.0.0.1:\(httpPort) is in use"), "\(busy.stderr)")
        first.stop()
        // The stop gives the lock up: the next run on the directory starts.
        let third = try ChildProcess(TestEnvironment.bridgeExecutable, ["run"], environment: environment, name: "third")
        defer { third.stop() }
        try await third.waitForLine(stderr: true, "control socket") { $0.contains("control socket listening") }
    }

    @Test("BRIDGE_MESH=tcp://HOST:PORT?mtu=N reaches the radio link: a hub with that MTU carries the bridge's fragmented announce")
    func meshMTU() async throws {
        let data = TestEnvironment.temporaryDirectory("run-mtu")
        // The bridge's signed announce is ~190 bytes: over a 100-byte hub it only gets through in fragments,
        // which the bridge sends only if it knows the link's MTU.
        let (hub, port) = try await RunStartTests.radioHub(["--mtu", "100"])
        defer { hub.stop() }
        let url = "tcp://127.0.0.1:\(port)?mtu=100"
        let reader = try ChildProcess(TestEnvironment.bridgeExecutable, ["mesh", "listen", "--mesh", url, "--ephemeral", "--nickname", "reader"])
        defer { reader.stop() }
        try await reader.waitForLine("reader ready") { $0.contains("\"ready\"") }
        let bridge = try ChildProcess(
            TestEnvironment.bridgeExecutable, ["run"],
            environment: Self.environment(data, ["BRIDGE_MESH": url, "BRIDGE_NICKNAME": "mtu-bridge"]), name: "bridge")
        defer { bridge.stop() }
        let peer = try await reader.waitForLine(timeout: .seconds(60), "the bridge's announce") { $0.contains("\"mtu-bridge\"") }
        #expect(try JSONParser().parse(peer)["event"] == .string("peer"))
        #expect(bridge.stderrLines.contains { $0.contains("tcp://127.0.0.1:\(port)?mtu=100") }, "\(bridge.transcript)")
    }
}

/// `[::1]` end to end: a bridge whose relay is a real relay on the IPv6 loopback and whose status
/// listener binds `[::1]` (issue 14: the configuration refused `[::1]`).
@Suite("bitchat-bridge run over IPv6 loopback", TestEnvironment.needsVenv, .serialized)
struct IPv6LoopbackTests {
    @Test("ws://[::1]:PORT relay connects; [::1]:PORT status listener answers")
    func ipv6Relay() async throws {
        let directory = TestEnvironment.temporaryDirectory("run-ipv6")
        let relayPort = LoopbackPort.free()
        let relay = try await Peers.start(.sdk, port: relayPort, directory: directory, host: "::1")
        defer { relay.stop() }
        let (hub, hubPort) = try await RunStartTests.radioHub()
        defer { hub.stop() }
        let httpPort = LoopbackPort.free()
        let bridge = try ChildProcess(
            TestEnvironment.bridgeExecutable, ["run"],
            environment: [
                "BRIDGE_GEOHASH": "u4pruy", "BRIDGE_DATA_DIR": directory + "/bridge", "BRIDGE_RELAYS": "ws://[::1]:\(relayPort)",
                "BRIDGE_RELAY_DIRECTORY": "off", "BRIDGE_MESH": "tcp://127.0.0.1:\(hubPort)", "BRIDGE_HTTP_LISTEN": "[::1]:\(httpPort)",
                "BRIDGE_POW_BITS": "0",
            ], name: "bridge")
        defer { bridge.stop() }
        let connected = try await bridge.waitForLine(stderr: true, "relay connected") { $0.contains("relay connected") }
        #expect(connected.contains("ws://[::1]:\(relayPort)"), "\(connected)")
        // The status listener on [::1]: the relay check is up once the bridge published a snapshot.
        let deadline = ContinuousClock.now + .seconds(30)
        var status: CLIResult
        repeat {
            status = try await runBridge(["status", "--http", "[::1]:\(httpPort)", "--json"])
            if status.status == 0 { break }
            try await Task.sleep(for: .milliseconds(200))
        } while ContinuousClock.now < deadline
        #expect(status.status == 0, "\(status.stderr)\n\(bridge.transcript)")
        let value = try JSONParser().parse(status.stdout)
        #expect(value["healthy"] == .bool(true), "\(status.stdout)")
    }

    @Test("--print-config shows sync_reply_budget from BRIDGE_SYNC_REPLY_BUDGET; a value out of range exits 64 naming the field")
    func syncReplyBudget() async throws {
        let data = TestEnvironment.temporaryDirectory("budget-config") + "/data"
        let shown = try await runBridge(["run", "--print-config"], environment: RunStartTests.environment(data, ["BRIDGE_SYNC_REPLY_BUDGET": "65536"]))
        #expect(shown.status == 0, "\(shown.stderr)")
        let config = try JSONParser().parse(shown.stdout)
        #expect(config["sync_reply_budget"]?["value"] == .integer(65_536) && config["sync_reply_budget"]?["source"] == .string("env"))
        let bad = try await runBridge(["run", "--print-config"], environment: RunStartTests.environment(data, ["BRIDGE_SYNC_REPLY_BUDGET": "100"]))
        #expect(bad.status == 64 && bad.stderr.contains("sync_reply_budget"), "\(bad.stderr)")
    }
}
