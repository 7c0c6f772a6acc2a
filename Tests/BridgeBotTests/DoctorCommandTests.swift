import BotSupport
import BridgeTestSupport
import BridgeTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge doctor` against the real binary (issue 23): over tcp:// segments it checks what applies (the
/// data directory, each radio hub, each relay, the clock against the relays' Date headers); every failure says what
/// to do, and the exit code is 1 exactly when a check failed. The Bluetooth checks run against a fake BlueZ in
/// BlueZTests (FakeBlueZTests).
@Suite("bitchat-bridge doctor")
struct DoctorCommandTests {
    static func environment(data: String, relay: LoopbackRelay, mesh: String) -> [String: String] {
        ["BRIDGE_GEOHASH": "u4pruy", "BRIDGE_DATA_DIR": data, "BRIDGE_RELAYS": relay.url, "BRIDGE_RELAY_DIRECTORY": "off",
         "BRIDGE_MESH": mesh, "BRIDGE_HTTP_LISTEN": "off"]
    }

    /// `name → (outcome, detail, fix)` of `doctor --json`'s checks (relay and radio segment lines keyed by their order).
    static func checks(_ stdout: String) throws -> [(name: String, outcome: String, detail: String, fix: String?)] {
        try #require(try JSONParser().parse(stdout)["checks"]?.arrayValue).map { check in
            (check["name"]?.stringValue ?? "", check["outcome"]?.stringValue ?? "", check["detail"]?.stringValue ?? "", check["fix"]?.stringValue)
        }
    }

    @Test("a hub and a relay that answer pass (exit 0); a relay 20 min behind and a hub that is down fail with what to do (exit 1)")
    func overTCPSegments() async throws {
        let relay = try LoopbackRelay()
        let (hub, hubPort) = try await RunStartTests.radioHub()
        defer { hub.stop() }
        let data = TestEnvironment.temporaryDirectory("doctor")
        let mesh = "tcp://127.0.0.1:\(hubPort)"

        let good = try await runBridge(["doctor"], environment: Self.environment(data: data, relay: relay, mesh: mesh))
        #expect(good.status == 0, "\(good.stdout)\n\(good.stderr)")
        for line in ["ok    configuration", "ok    data directory", "skip  http listen", "skip  bluetooth", "ok    radio segment", "ok    relay", "ok    clock",
                     "doctor: no check failed."] {
            #expect(good.stdout.contains(line), "\(line): \(good.stdout)")
        }
        #expect(good.stdout.contains("a radio hub listens at \(mesh)") && good.stdout.contains("\(relay.url) answered in"))
        #expect(relay.published.all.isEmpty, "doctor posts nothing")

        // The relay's clock 20 minutes behind this host's, and a second segment where nothing listens.
        relay.setClockOffset(-1_200)
        let down = "tcp://127.0.0.1:\(RunStartTests.closedPort())"
        let bad = try await runBridge(["doctor", "--json"], environment: Self.environment(data: data, relay: relay, mesh: mesh + "," + down))
        #expect(bad.status == 1, "\(bad.stdout)")
        #expect(bad.stderr.contains("doctor: 2 of 9 checks failed"), "\(bad.stderr)")
        let checks = try Self.checks(bad.stdout)
        let clock = try #require(checks.first { $0.name == "clock" })
        #expect(clock.outcome == "fail" && clock.detail.contains("ahead of the relays"), "\(clock)")
        // The Date header has 1 s resolution and the run takes a moment: 1,199–1,201 s.
        #expect(["1199 s", "1200 s", "1201 s"].contains { clock.detail.contains($0) }, "\(clock.detail)")
        #expect(clock.fix?.contains("timedatectl set-ntp true") == true)
        let segments = checks.filter { $0.name == "radio segment" }
        #expect(segments.map(\.outcome) == ["ok", "fail"], "\(segments)")
        #expect(segments.last?.detail.contains(down) == true && segments.last?.fix?.contains("radio-hub --port") == true)
        await relay.stop()
    }

    @Test("a group-writable data directory and an invalid configuration fail, naming the fix")
    func dataDirectoryAndConfiguration() async throws {
        let relay = try LoopbackRelay()
        let data = TestEnvironment.temporaryDirectory("doctor-open")
        #expect(chmod(data, 0o770) == 0)
        let environment = Self.environment(data: data, relay: relay, mesh: "tcp://127.0.0.1:\(RunStartTests.closedPort())")
        let open = try await runBridge(["doctor"], environment: environment)
        #expect(open.status == 1)
        #expect(open.stdout.contains("FAIL  data directory") && open.stdout.contains("is writable by its group") && open.stdout.contains("chmod 700 \(data)"),
                "\(open.stdout)")

        var typo = environment
        typo["BRIDGE_GEOHASH"] = nil
        typo["BRIDGE_GEOHSAH"] = "u4pruy"
        let invalid = try await runBridge(["doctor"], environment: typo)
        #expect(invalid.status == 1 && invalid.stdout.contains("FAIL  configuration") && invalid.stdout.contains("did you mean BRIDGE_GEOHASH?"),
                "\(invalid.stdout)\n\(invalid.stderr)")
        await relay.stop()
    }

    @Test("issue 35: a data directory that does not exist warns of a new identity; one another bridge holds, and an http_listen port something listens on, fail naming the fix")
    func newIdentityHeldDirectoryAndPort() async throws {
        let relay = try LoopbackRelay()
        let (hub, hubPort) = try await RunStartTests.radioHub()
        defer { hub.stop() }
        let mesh = "tcp://127.0.0.1:\(hubPort)"
        let typo = TestEnvironment.temporaryDirectory("doctor-new") + "/stage-a"
        var withOperatorKeys = Self.environment(data: typo, relay: relay, mesh: mesh)
        withOperatorKeys["BRIDGE_OPERATOR_KEYS"] = String(repeating: "ab", count: 32)
        let fresh = try await runBridge(["doctor"], environment: withOperatorKeys)
        #expect(fresh.status == 0, "a warning, not a failure: \(fresh.stdout)")
        #expect(fresh.stdout.contains("warn  data directory") && fresh.stdout.contains("new bridge identity"), "\(fresh.stdout)")
        #expect(fresh.stdout.contains("warn  site records") && fresh.stdout.contains("no operator.key"), "follows the list only: \(fresh.stdout)")
        #expect(access(typo, F_OK) != 0, "doctor reads, never creates")

        // A bridge's lock on the directory (an open file holding flock, its PID written), and a listener on the port.
        let data = TestEnvironment.temporaryDirectory("doctor-held")
        let lock = open(data + "/bridge.lock", O_RDWR | O_CREAT, 0o600)
        #expect(lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0)
        defer { close(lock) }
        _ = "4242\n".withCString { write(lock, $0, 5) }
        let listener = try #require(LoopbackListener())
        defer { listener.close() }
        var environment = Self.environment(data: data, relay: relay, mesh: mesh)
        environment["BRIDGE_HTTP_LISTEN"] = "127.0.0.1:\(listener.port)"
        let held = try await runBridge(["doctor", "--json"], environment: environment)
        #expect(held.status == 1, "\(held.stdout)")
        let checks = try Self.checks(held.stdout)
        let directory = try #require(checks.first { $0.name == "data directory" })
        #expect(directory.outcome == "fail" && directory.detail.contains("PID 4242") && directory.fix?.contains("BRIDGE_DATA_DIR") == true, "\(directory)")
        let listen = try #require(checks.first { $0.name == "http listen" })
        #expect(listen.outcome == "fail" && listen.fix?.contains("BRIDGE_HTTP_LISTEN") == true, "\(listen)")
        await relay.stop()
    }
}

/// A TCP listener on 127.0.0.1 at a port the kernel picks (something else holding a port the bridge wants).
struct LoopbackListener {
    let fd: Int32
    let port: Int

    init?() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 1) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard fd >= 0, bound else { return nil }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(fd) }
}
