import BotCrypto
import BotSupport
import BridgeTestSupport
import Foundation
import Nostr
import NostrRelay
import Synchronization
import Testing
import WebSocketRuntime

/// Runs a pool and collects what it reports.
final class PoolHarness: Sendable {
    let pool: RelayPool
    let reports = Recorder<RelayPoolEvent>()
    let runner: Task<Void, Never>
    let consumer: Task<Void, Never>

    init(urls: [String], caFile: String? = nil, authKey: SchnorrSecretKey? = nil,
         configuration: RelayPoolCore.Configuration? = nil, logger: Logger = Logger(label: "test", level: .error)) throws {
        let pool = try RelayPool(relayURLs: urls, configuration: configuration ?? .init(authKey: authKey, jitterUnit: { 0.5 }),
                                 webSocket: .init(caFile: caFile, connectTimeoutSeconds: 5),
                                 logger: logger, unixNow: { Int64(Date().timeIntervalSince1970) })
        self.pool = pool
        runner = Task { try? await pool.run() }
        let reports = reports
        consumer = Task { for await report in pool.events { reports.append(report) } }
    }

    var events: [NostrEvent] { reports.all.compactMap { if case .event(let e, _, _) = $0 { e } else { nil } } }
    var rejections: [InboundDrop] { reports.all.compactMap { if case .rejected(_, _, let r, _) = $0 { r } else { nil } } }

    /// Waits on the pool's reports (looking again after each), at most `timeout`: generous on purpose, the
    /// harness's consumer runs on the cooperative pool, which other suites' long synchronous work held for over
    /// 20 s in a full parallel run on 2 cores.
    func wait(_ what: String, timeout: Duration = .seconds(60), until predicate: @Sendable ([RelayPoolEvent]) -> Bool) async throws {
        let (seconds, attoseconds) = timeout.components
        if await reports.until(within: Double(seconds) + Double(attoseconds) / 1e18, predicate) { return }
        Issue.record("timed out waiting for \(what); got \(reports.all)")
        throw CancellationError()
    }

    func stop() async {
        runner.cancel()
        await runner.value
        await consumer.value
    }
}

func connectedCount(_ reports: [RelayPoolEvent]) -> Int { reports.filter { if case .connected = $0 { true } else { false } }.count }

@Suite("Real relays on loopback", TestEnvironment.needsVenv, .serialized)
struct RealRelayTests {
    static let key = try! SchnorrSecretKey(bytes: [UInt8](repeating: 5, count: 32))

    static func chat(_ text: String, geohash: String = "u4pruy") throws -> NostrEvent {
        let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: Int64(Date().timeIntervalSince1970), kind: 20000,
                                     tags: [["g", geohash], ["n", "test"]], content: text)
        return try NostrPoW.mine(unsigned, target: 8).event.signed(with: key)
    }

    static let filter = NostrFilter(kinds: [20000, 20001], tags: ["g": ["u4pruy"]], limit: 200)

    @Test(arguments: [Peers.Kind.sdk, .nostrRelay])
    func postListenRoundTripAndRestartMidStream(_ kind: Peers.Kind) async throws {
        let directory = TestEnvironment.temporaryDirectory("relay")
        let port = LoopbackPort.free()
        let url = "ws://127.0.0.1:\(port)"
        var relay = try await Peers.start(kind, port: port, directory: directory)
        let listener = try PoolHarness(urls: [url])
        listener.pool.subscribe(id: "geo-u4pruy", filters: [Self.filter], lookback: 3600)
        try await listener.wait("listener connected") { connectedCount($0) >= 1 }
        let publisher = try PoolHarness(urls: [url])
        let first = try Self.chat("before restart / \"quoted\" é 😀")
        publisher.pool.publish(first)
        try await listener.wait("first event") { $0.contains(.event(first, relay: url, subscription: "geo-u4pruy")) }
        try await publisher.wait("OK") { $0.contains { if case .ok(_, first.id.hex, true, _) = $0 { true } else { false } } }

        // Kill the relay mid-stream (no graceful stop) and start it again on the same port and database.
        relay.stop(signal: SIGKILL)
        try await listener.wait("disconnect") { $0.contains { if case .disconnected = $0 { true } else { false } } }
        relay = try await Peers.start(kind, port: port, directory: directory)
        try await listener.wait("reconnected", timeout: .seconds(30)) { connectedCount($0) >= 2 }
        try await publisher.wait("publisher reconnected", timeout: .seconds(30)) { connectedCount($0) >= 2 }
        let second = try Self.chat("after restart")
        publisher.pool.publish(second)
        try await listener.wait("second event") { $0.contains { if case .event(second, _, _) = $0 { true } else { false } } }
        // nostr-relay replays the stored first event on resubscribe, before its EOSE; once that second
        // EOSE is in, dedup must have kept the first event to one delivery.
        try await listener.wait("EOSE after resubscribing") { _ in (listener.pool.stats(url)?.eoseReceived ?? 0) >= 2 }
        #expect(listener.events.filter { $0.id == first.id }.count == 1)
        #expect(listener.events.filter { $0.id == second.id }.count == 1)
        if kind == .nostrRelay { #expect((listener.pool.stats(url)?.duplicates ?? 0) >= 1, "the replayed copy was deduplicated") }
        #expect(listener.rejections.isEmpty)
        await publisher.stop()
        await listener.stop()
        relay.stop(signal: SIGKILL)
    }

    @Test func hostileRelayForwardingTamperedEventsIsRejected() async throws {
        let port = LoopbackPort.free()
        let url = "ws://127.0.0.1:\(port)"
        let relay = try await Peers.start(.monstr, port: port, directory: "")
        let listener = try PoolHarness(urls: [url])
        listener.pool.subscribe(id: "geo-u4pruy", filters: [Self.filter], lookback: 3600)
        try await listener.wait("listener connected") { connectedCount($0) >= 1 }
        // A raw client publishes a tampered copy (content changed after signing) through monstr.
        let genuine = try Self.chat("genuine")
        let tampered = genuine.json.replacingOccurrences(of: "\"content\":\"genuine\"", with: "\"content\":\"tampered\"")
        let raw = try PoolHarnessRaw(url: url)
        raw.send(#"["EVENT",\#(tampered)]"#)
        raw.send(#"["EVENT",\#(genuine.json)]"#)
        try await listener.wait("genuine event") { $0.contains { if case .event(genuine, _, _) = $0 { true } else { false } } }
        #expect(listener.rejections.contains(.idMismatch))
        #expect(listener.events.count == 1)
        raw.stop()
        await listener.stop()
        relay.stop(signal: SIGKILL)
    }
}

/// A bare WebSocket client for sending hand-made frames.
final class PoolHarnessRaw: Sendable {
    let runtime: WebSocketRuntime
    let id: ConnectionID
    init(url: String) throws {
        runtime = WebSocketRuntime(configuration: .init(), logger: Logger(label: "raw", level: .error)) { _ in }
        try runtime.start()
        id = runtime.open(try WebSocketEndpoint(url: url))
    }
    func send(_ text: String) { runtime.send(id, text: text) }
    func stop() { runtime.shutdown() }
}

@Suite("nostr-sdk agrees with our ids and signatures", TestEnvironment.needsVenv)
struct NostrSDKInteropTests {
    static let tricky: [String] = ["\"", "\\", "\n", "\r", "\t", "\u{8}", "\u{c}", "\u{0}", "\u{1}", "\u{1f}", "\u{7f}", "/",
                                   "é", "😀", "\u{2028}", "\u{2029}", "a", " ", "中", "\u{feff}", "<"]

    @Test func tenThousandRandomEventsBothWays() async throws {
        let count = 10_000
        let python = try ChildProcess(TestEnvironment.venvBinary("python"), [Peers.fixtures + "/sdk_interop.py"], name: "sdk-interop")
        defer { python.stop(signal: SIGKILL) }
        var rng = SystemRandomNumberGenerator()
        let key = try SchnorrSecretKey(bytes: SecureRandom.bytes(32))
        var ours: [NostrEvent] = []
        var batch = ""
        for i in 0..<count {
            func text(_ n: Int) -> String { (0..<Int.random(in: 0...n, using: &rng)).map { _ in Self.tricky.randomElement(using: &rng)! }.joined() }
            let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: 1_700_000_000 + Int64(i), kind: 20000,
                                         tags: [["g", text(6)], ["n", text(8)]], content: text(40))
            let event = try unsigned.signed(with: key)
            ours.append(event)
            batch += JSONWriter.compact(.object([("check", event.jsonValue)])) + "\n"
        }
        python.write(batch)
        let answers = try await python.waitForLines(count: count, timeout: .seconds(120), "sdk answers") { $0.contains("\"valid\"") }
        var mismatches = 0
        for (event, line) in zip(ours, answers) {
            let value = try JSONParser().parse(line)
            if value["id"]?.stringValue != event.id.hex || value["valid"]?.boolValue != true { mismatches += 1 }
        }
        #expect(mismatches == 0)

        python.write(#"{"generate": \#(count), "seed": 7}"# + "\n")
        let theirs = try await python.waitForLines(count: count, timeout: .seconds(120), "sdk events") { $0.hasPrefix("{\"id\"") && $0.contains("\"sig\"") }
        var failures = 0
        for line in theirs {
            do { _ = try UnverifiedEvent(json: line).verified() } catch { failures += 1 }
        }
        #expect(theirs.count == count)
        #expect(failures == 0)
    }
}
