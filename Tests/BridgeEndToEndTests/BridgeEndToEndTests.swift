import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// A small world on loopback: one real relay, radio-hub "islands", bridges (`bitchat-bridge run`), and
/// scripted phones (`mesh listen`, `mesh deposit`, `nostr post`), all real processes that this test starts
/// and stops.
final class World: @unchecked Sendable {
    let directory = TestEnvironment.temporaryDirectory("e2e")
    var processes: [ChildProcess] = []
    var relayPort = 0
    var relay: ChildProcess?

    deinit { for process in processes.reversed() { process.stop(signal: SIGKILL) } }

    var relayURL: String { "ws://127.0.0.1:\(relayPort)" }

    func startRelay(_ kind: Peers.Kind = .sdk, arguments: [String] = []) async throws {
        if relayPort == 0 { relayPort = LoopbackPort.free() }
        let process = try await Peers.start(kind, port: relayPort, directory: directory, arguments: arguments)
        relay = process
        processes.append(process)
    }

    /// A radio-hub island; returns its port.
    func startIsland(loss: Double = 0) async throws -> Int {
        let port = LoopbackPort.free()
        let hub = try spawn(
            ["radio-hub", "--listen", "127.0.0.1:\(port)", "--mtu", "512"] + (loss > 0 ? ["--loss", "\(loss)"] : []),
            name: "hub-\(port)")
        try await hub.waitForLine("hub listening") { $0.contains("\"listening\"") }
        return port
    }

    func spawn(_ arguments: [String], environment: [String: String] = [:], name: String) throws -> ChildProcess {
        let process = try ChildProcess(TestEnvironment.bridgeExecutable, arguments, environment: environment, name: name)
        processes.append(process)
        return process
    }

    /// A bridge on `island`, with its own data directory `name` (kept across restarts).
    func startBridge(_ name: String, island: Int, extra: [String: String] = [:]) async throws -> ChildProcess {
        let environment = [
            "BRIDGE_GEOHASH": "u4pruy", "BRIDGE_DATA_DIR": "\(directory)/\(name)", "BRIDGE_RELAYS": relayURL,
            "BRIDGE_RELAY_DIRECTORY": "off", "BRIDGE_MESH": "tcp://127.0.0.1:\(island)", "BRIDGE_HTTP_LISTEN": "off",
            "BRIDGE_NICKNAME": name, "BRIDGE_POW_BITS": "8",
        ].merging(extra) { $1 }
        let bridge = try spawn(["run"], environment: environment, name: name)
        try await bridge.waitForLine(stderr: true, "\(name) connected to the relay") { $0.contains("relay connected") }
        return bridge
    }

    /// A mesh-only phone printing what it hears.
    func startReader(_ name: String, island: Int) async throws -> ChildProcess {
        let reader = try spawn(["mesh", "listen", "--mesh", "tcp://127.0.0.1:\(island)", "--ephemeral", "--nickname", name], name: name)
        try await reader.waitForLine("\(name) ready") { $0.contains("\"ready\"") }
        return reader
    }

    /// The common world: a relay, one island, one bridge `name` on it and a reader that has verified the
    /// bridge's announce.
    func startGateway(
        _ name: String = "gateway", extra: [String: String] = [:]
    ) async throws -> (island: Int, bridge: ChildProcess, reader: ChildProcess) {
        try await startRelay()
        let island = try await startIsland()
        let bridge = try await startBridge(name, island: island, extra: extra)
        let reader = try await startReader("reader", island: island)
        try await waitForBridges(reader, count: 1)
        return (island, bridge, reader)
    }

    /// Waits until `reader` has verified the announces of `count` bridges (so carriers can reach it).
    func waitForBridges(_ reader: ChildProcess, count: Int) async throws {
        _ = try await reader.waitForLines(count: count, timeout: .seconds(30), "bridge announces") {
            $0.contains("\"peer\"") && $0.contains("\"bridge\"")
        }
    }

    func deposit(island: Int, text: String, nickname: String = "phone") async throws -> String {
        let phone = try spawn(
            ["mesh", "deposit", "--mesh", "tcp://127.0.0.1:\(island)", "--ephemeral", "--nickname", nickname, "--cell", "u4pruy", text],
            name: "depositor")
        let line = try await phone.waitForLine("deposit") { $0.contains("\"deposited\"") }
        return try #require(try JSONParser().parse(line)["eventID"]?.stringValue)
    }

    /// Posts from one user (one key, kept in the user's data directory), in order.
    /// Publishes `texts` as `user`, returning the event ids in order. The first post runs alone (it
    /// creates the user's identity in its data directory); the rest are started together, so a burst
    /// carries created_at values a second or two apart however loaded the machine is — one process after
    /// another took up to ~6 s each in a loaded CI run, and the message bucket (6, then 1 per 10 s)
    /// refilled between them.
    func posts(_ texts: [String], as user: String) async throws -> [String] {
        func start(_ text: String) throws -> ChildProcess {
            try spawn(
                ["nostr", "post", "--geohash", "u4pruy", "--relay", relayURL, "--pow", "8", "--nickname", user, text],
                environment: ["BRIDGE_DATA_DIR": "\(directory)/phone-\(user)"], name: "post-\(user)")
        }
        func published(_ poster: ChildProcess) async throws -> String {
            let line = try await poster.waitForLine("post by \(user)") { $0.contains("\"published\"") }
            return try #require(try JSONParser().parse(line)["event"]?["id"]?.stringValue)
        }
        guard let first = texts.first else { return [] }
        var ids = [try await published(try start(first))]
        let rest = try texts.dropFirst().map(start)
        for poster in rest { ids.append(try await published(poster)) }
        return ids
    }

    func post(_ text: String) async throws -> String {
        let poster = try spawn(
            ["nostr", "post", "--geohash", "u4pruy", "--relay", relayURL, "--pow", "8", text],
            environment: ["BRIDGE_DATA_DIR": "\(directory)/poster-\(UUID().uuidString.prefix(6))"], name: "poster")
        let line = try await poster.waitForLine("post") { $0.contains("\"published\"") }
        return try #require(try JSONParser().parse(line)["event"]?["id"]?.stringValue)
    }
}

/// Carrier lines a reader printed for `eventID`.
func carriers(_ reader: ChildProcess, eventID: String) -> [JSONValue] {
    reader.stdoutLines.compactMap { try? JSONParser().parse($0) }.filter {
        $0["event"] == .string("carrier") && $0["nostrEvent"]?["id"] == .string(eventID)
    }
}

/// The Nostr interop run: `bitchat-bridge run` against a third-party relay (nostr-sdk's `LocalRelay`) and phones that are
/// processes of their own. Every other scenario runs in the in-process world (`Tests/BridgeWorldTests`).
@Suite("Bridge end to end (real relay, virtual radio, real processes)", TestEnvironment.needsVenv, .serialized)
struct BridgeEndToEndTests {
    @Test("channel event → fromGateway carrier on the mesh (nostr-sdk relay, separate processes)")
    func channelReachesTheMesh() async throws {
        let world = World()
        let (_, _, reader) = try await world.startGateway()
        let id = try await world.post("hello from the internet")
        _ = try await reader.waitForLine("the gateway carrier") { $0.contains(id) }
        let received = carriers(reader, eventID: id)
        #expect(received.count == 1 && received.first?["direction"] == .string("fromGateway"))
    }
}

/// The message ids in a bridge's moderation log, once it holds at least `atLeast` records.
func moderationRecords(_ world: World, _ bridge: String, atLeast: Int) async throws -> Set<String> {
    let deadline = ContinuousClock.now + .seconds(30)
    while true {
        let modlog = try world.spawn(["modlog", "--json", "--data-dir", "\(world.directory)/\(bridge)"], name: "modlog")
        _ = try await modlog.waitForExit()
        let ids = Set(modlog.stdoutLines.compactMap { try? JSONParser().parse($0)["message_id"]?.stringValue })
        if ids.count >= atLeast || ContinuousClock.now > deadline { return ids }
        try await Task.sleep(for: .milliseconds(200))
    }
}

@Suite("Bridge crash safety (storing relay)", TestEnvironment.needsVenv, .serialized)
struct BridgeCrashTests {
    @Test("kill -9 and restart: the relay's replay is not forwarded again; the stranger cache survives")
    func killNineRestart() async throws {
        let world = World()
        // nostr-relay stores kind 20000 and replays it to a new subscription: the backfill a restart sees.
        try await world.startRelay(.nostrRelay)
        let island1 = try await world.startIsland()
        let island2 = try await world.startIsland()
        _ = try await world.startBridge("bridge-a", island: island1)
        let bridgeC = try await world.startBridge("bridge-c", island: island2)
        let reader2 = try await world.startReader("reader2", island: island2)
        try await world.waitForBridges(reader2, count: 1)
        let first = try await world.deposit(island: island1, text: "before the crash")
        let channel = try await world.post("channel before the crash")
        _ = try await reader2.waitForLine("deposit downlinked") { $0.contains(first) }
        _ = try await reader2.waitForLine("post downlinked") { $0.contains(channel) }
        // A burst from one key, so the moderation log has records to survive the crash.
        _ = try await world.posts((1...8).map { "BUY CHEAP TICKETS \($0)" }, as: "burster")
        let before = try await moderationRecords(world, "bridge-c", atLeast: 2)

        bridgeC.stop(signal: SIGKILL)
        // Same data directory, so the same peer ID: the reader does not report it as a new peer.
        _ = try await world.startBridge("bridge-c", island: island2)
        // After the restart a new message still crosses (the barrier), the replayed ones do not.
        let after = try await world.deposit(island: island1, text: "after the crash")
        _ = try await reader2.waitForLine("post-restart deposit") { $0.contains(after) }
        try await Task.sleep(for: .seconds(2))
        #expect(carriers(reader2, eventID: first).count == 1)
        #expect(carriers(reader2, eventID: channel).count == 1)
        #expect(carriers(reader2, eventID: after).count == 1)

        // The moderation log kept every record reported before the crash.
        let survived = try await moderationRecords(world, "bridge-c", atLeast: before.count)
        #expect(!before.isEmpty && before.isSubset(of: survived))
        // The stranger cache of the killed bridge opens and still knows the peers it met.
        let stats = try world.spawn(
            ["identities", "list", "--json", "--data-dir", "\(world.directory)/bridge-c"], name: "identities")
        #expect(try await stats.waitForExit() == 0)
        #expect(stats.stdoutLines.joined().contains("mesh:"), "\(stats.transcript)")
    }
}
