import BitchatWire
import BotSupport
import BridgeTestSupport
import Foundation
@testable import Mesh
@testable import MeshRuntime
import Testing
import VirtualRadio

@Suite("Virtual radio: framing, hub, client transport")
struct VirtualRadioTests {
    @Test func framingSplitsAndJoinsStreams() {
        var decoder = RadioFraming.Decoder()
        let a = RadioFraming.encode([1, 2, 3]) ?? []
        let b = RadioFraming.encode(Array(repeating: 9, count: 300)) ?? []
        let keepAlive: [UInt8] = [0, 0]
        let stream = a + keepAlive + b
        var frames: [[UInt8]] = []
        for byte in stream { frames += decoder.push([byte]) }
        #expect(frames == [[1, 2, 3], Array(repeating: 9, count: 300)])
        #expect(RadioFraming.encode(Array(repeating: 0, count: 65_535))?.count == 65_537)
        #expect(RadioFraming.encode(Array(repeating: 0, count: 65_536)) == nil)
    }

    @Test func endpointURLs() throws {
        #expect(try RadioClientTransport.Endpoint(url: "tcp://127.0.0.1:4000") == .init(host: "127.0.0.1", port: 4000, mtu: 512))
        #expect(try RadioClientTransport.Endpoint(url: "tcp://127.0.0.1:4000?mtu=185").mtu == 185)
        #expect(throws: RadioError.self) { try RadioClientTransport.Endpoint(url: "udp://127.0.0.1:4000") }
        #expect(throws: RadioError.self) { try RadioClientTransport.Endpoint(url: "tcp://localhost:4000") }
    }

    /// Two in-process nodes on one hub with a 185-byte MTU: a 4 KB message crosses as fragments.
    @Test(.timeLimit(.minutes(3)))
    func inProcessNodesExchangeFragmentedMessage() async throws {
        let hub = try RadioHub(host: "127.0.0.1", port: 0, configuration: .init(mtu: 185))
        let hubThread = Thread { hub.run() }
        hubThread.start()
        defer { hub.stop() }
        let endpoint = RadioClientTransport.Endpoint(host: "127.0.0.1", port: hub.port, mtu: 185)
        let a = try RadioClientTransport.connect([endpoint])
        let b = try RadioClientTransport.connect([endpoint])
        let clock: @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }
        let nodeA = MeshNode(engine: MeshPeerEngine(identity: makeIdentity("a")), transport: a, wallClock: clock, seed: 1)
        let nodeB = MeshNode(engine: MeshPeerEngine(identity: makeIdentity("b")), transport: b, wallClock: clock, seed: 2)
        var random = SeededRandom(seed: 5)
        let text = String((0..<4096).map { _ in Character(Unicode.Scalar(UInt8(33 + random.next() % 94))) })
        let received: MeshPublicMessage? = await withTaskGroup(of: MeshPublicMessage?.self) { group in
            group.addTask { await nodeA.run(); return nil }
            group.addTask { await nodeB.run(); return nil }
            group.addTask {
                // B announces on link-up; once A has verified B, B knows A too (announce-back), so A can speak.
                for await action in nodeA.actions {
                    if case .peerVerified = action { break }
                }
                await nodeA.submit(.sendPublicMessage(text))
                return nil
            }
            group.addTask {
                for await action in nodeB.actions {
                    if case .publicMessage(let message) = action { return message }
                }
                return nil
            }
            var result: MeshPublicMessage?
            for await value in group {
                if let value {
                    result = value
                    break
                }
            }
            a.close()
            b.close()
            group.cancelAll()
            return result
        }
        #expect(received?.text == text)
        #expect(hub.stats.droppedOverMTU == 0)
        #expect(hub.stats.framesIn > 20, "the message travelled as fragments")
    }

    /// `listener` printed the barrier message, and carol's message exactly once before it.
    static func expectCarolOnce(at listener: ChildProcess) async throws {
        let name = listener.name
        try await listener.waitForLine("barrier at " + name) { $0.contains("\"text\":\"barrier\"") }
        let hits = listener.stdoutLines.filter { $0.contains("\"message\"") && $0.contains("hello from carol") }
        #expect(hits.count == 1, "\(name) received carol's message exactly once:\n\(listener.transcript)")
    }

    /// The acceptance scenario with real processes: a radio-hub, two `mesh listen`, one `mesh say`.
    /// Every wait has its own deadline; the time limit is only a backstop, set well above what a loaded
    /// full-suite run on 2 cores needs (52–67 s there). With a 1-minute limit, 4 of 7 loaded full runs (and
    /// 1 of 28 single runs beside a release build) crashed at ~60 s inside this test reading a local's
    /// string (a corrupted value; the AddressSanitizer suite run finds no memory error in our code, so we
    /// suspect the limit's cancellation in the 6.3.1 toolchain); 0 of 3 full runs since the change.
    @Test(.timeLimit(.minutes(3)))
    func listenersSeeEachOtherAndOneSayExactlyOnce() async throws {
        let exe = TestEnvironment.bridgeExecutable
        let hub = try ChildProcess(exe, ["radio-hub", "--listen", "127.0.0.1:0", "--mtu", "185"], name: "hub")
        defer { hub.stop() }
        let listening = try await hub.waitForLine("hub listening") { $0.contains("\"listening\"") }
        let port = try #require(try JSONParser().parse(listening)["port"]?.integerValue)
        let mesh = "tcp://127.0.0.1:\(port)?mtu=185"
        let alice = try ChildProcess(exe, ["mesh", "listen", "--mesh", mesh, "--ephemeral", "--nickname", "alice"], name: "alice")
        defer { alice.stop() }
        let aliceReady = try await alice.waitForLine("alice ready") { $0.contains("\"ready\"") }
        let bob = try ChildProcess(exe, ["mesh", "listen", "--mesh", mesh, "--ephemeral", "--nickname", "bob"], name: "bob")
        defer { bob.stop() }
        let bobReady = try await bob.waitForLine("bob ready") { $0.contains("\"ready\"") }
        let aliceID = try #require(try JSONParser().parse(aliceReady)["peerID"]?.stringValue)
        let bobID = try #require(try JSONParser().parse(bobReady)["peerID"]?.stringValue)
        // Each sees the other's signed announce (the engine only reports verified peers).
        try await alice.waitForLine("alice sees bob") { $0.contains("\"peer\"") && $0.contains(bobID) }
        try await bob.waitForLine("bob sees alice") { $0.contains("\"peer\"") && $0.contains(aliceID) }

        let say = try ChildProcess(exe, ["mesh", "say", "--mesh", mesh, "--ephemeral", "--nickname", "carol", "hello from carol"], name: "carol")
        let sayStatus = try await say.waitForExit()
        #expect(sayStatus == 0)
        // A second message is the barrier: once it arrived, any duplicate of the first would have too.
        let barrier = try ChildProcess(exe, ["mesh", "say", "--mesh", mesh, "--ephemeral", "barrier"], name: "barrier")
        let barrierStatus = try await barrier.waitForExit()
        #expect(barrierStatus == 0)
        try await Self.expectCarolOnce(at: alice)
        try await Self.expectCarolOnce(at: bob)
        alice.stop(signal: SIGINT)
        let aliceLeft = try await bob.waitForLine("bob sees alice leave") { $0.contains("\"peerLost\"") && $0.contains(aliceID) }
        #expect(aliceLeft.contains("\"leave\""))
    }
}
