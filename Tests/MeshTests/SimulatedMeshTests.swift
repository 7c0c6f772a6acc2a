import BotSupport
import BitchatWire
import BotCrypto
@testable import Mesh
@testable import MeshRuntime
import Testing

func makeIdentity(_ name: String) -> MeshIdentity {
    MeshIdentity(noisePublicKey: X25519PrivateKey.generate().publicKey, signingKey: .generate(), nickname: name)
}

let start: UInt64 = 1_750_000_000_000

@Suite("Simulated mesh: end-to-end delivery, TTL, dedup, fragmentation")
struct SimulatedMeshTests {
    /// Five nodes, every node announces; after warm-up each node knows the others.
    func mesh(edges: [(Int, Int)], mtu: Int = 512, seed: UInt64 = 1) -> SimulatedMesh {
        var mesh = SimulatedMesh(identities: (0..<5).map { makeIdentity("n\($0)") }, startTime: start, seed: seed)
        mesh.recordFrames = true
        for (a, b) in edges { mesh.connect(a, b, mtu: mtu) }
        mesh.run(for: 3_000)
        return mesh
    }

    @Test(arguments: [
        ("line", [(0, 1), (1, 2), (2, 3), (3, 4)], 0),
        ("star from a leaf", [(0, 1), (0, 2), (0, 3), (0, 4)], 1),
        ("star from the centre", [(0, 1), (0, 2), (0, 3), (0, 4)], 0),
    ])
    func publicMessageReachesEveryNodeExactlyOnce(name: String, edges: [(Int, Int)], origin: Int) throws {
        var mesh = mesh(edges: edges)
        for node in 0..<5 {
            #expect(mesh.nodes[node].peers.count == 4, "\(name): node \(node) verified every other announce")
        }
        mesh.apply(.sendPublicMessage("hello mesh"), at: origin)
        mesh.run(for: 5_000)
        for node in 0..<5 where node != origin {
            let received = mesh.publicMessages(at: node)
            #expect(received.count == 1, "\(name): node \(node) got the message exactly once")
            #expect(received.first?.text == "hello mesh")
            #expect(received.first?.sender == mesh.nodes[origin].identity.peerID)
        }
        #expect(mesh.publicMessages(at: origin).isEmpty, "the origin never delivers its own echo")
    }

    @Test func ttlDecrementsPerHopOnALine() throws {
        var mesh = mesh(edges: [(0, 1), (1, 2), (2, 3), (3, 4)])
        mesh.apply(.sendPublicMessage("ttl"), at: 0)
        mesh.run(for: 5_000)
        // Degree ≤ 2 keeps cap = TTL, so each hop subtracts exactly one: 7 at hop 1, 6 at hop 2, ...
        for node in 1..<5 {
            #expect(mesh.publicMessages(at: node).first?.ttl == UInt8(8 - node))
        }
        // Every relay saw the duplicate coming back? On a line nobody sends back out of the ingress link.
        #expect(mesh.nodes[4].counters.duplicates == 0)
    }

    @Test func ttlBudgetStopsFlooding() throws {
        // A line of 9 nodes: a TTL-7 message reaches hops 1…6 as messages with TTL 7…2; the node at hop 7
        // still receives it with TTL 1 and does not relay; hop 8 never sees it.
        var mesh = SimulatedMesh(identities: (0..<9).map { makeIdentity("n\($0)") }, startTime: start, seed: 2)
        for i in 0..<8 { mesh.connect(i, i + 1) }
        mesh.run(for: 3_000)
        mesh.apply(.sendPublicMessage("far"), at: 0)
        mesh.run(for: 5_000)
        // Nodes 7 and 8 may not know node 0 (announces also stop after 7 hops), so count rx counters instead.
        #expect(mesh.nodes[7].counters.received[.message] == 1)
        #expect(mesh.nodes[8].counters.received[.message] == 0)
    }

    @Test func cycleDeliversOnceAndDropsDuplicates() throws {
        var mesh = mesh(edges: [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (1, 3)])
        mesh.apply(.sendPublicMessage("loop"), at: 0)
        mesh.run(for: 5_000)
        for node in 1..<5 { #expect(mesh.publicMessages(at: node).count == 1) }
        let duplicates = (0..<5).map { mesh.nodes[$0].counters.duplicates }.reduce(0, +)
        #expect(duplicates > 0, "the cycle produced duplicates, and dedup dropped them")
    }

    @Test func fourKilobyteMessageCrosses185ByteLinksInFragments() throws {
        var mesh = mesh(edges: [(0, 1), (1, 2), (2, 3), (3, 4)], mtu: 185)
        // Announces fit in 185 bytes; the message needs ~30 fragments.
        var random = SeededRandom(seed: 4)
        let text = String((0..<4096).map { _ in Character(Unicode.Scalar(UInt8(33 + random.next() % 94))) })
        mesh.apply(.sendPublicMessage(text), at: 0)
        mesh.run(for: 10_000)
        for node in 1..<5 {
            let received = mesh.publicMessages(at: node)
            #expect(received.count == 1)
            #expect(received.first?.text == text)
        }
        #expect(mesh.framesOverMTU == 0, "every frame on the air fits the 185-byte MTU")
        let fragmentFrames = mesh.airLog.filter { $0.frame.count > 1 && $0.frame[1] == MessageType.fragment.rawValue }
        // Even compressed (printable text deflates to ~80 %), the frame needs > 20 fragments per hop.
        #expect(fragmentFrames.count >= 4 * 20)
        #expect(mesh.nodes[4].counters.fragment[.reassembled] == 1)
    }

    @Test func lossyLinksStillDeliverAtMostOnce() throws {
        var mesh = SimulatedMesh(identities: (0..<5).map { makeIdentity("n\($0)") }, startTime: start, seed: 7)
        for (a, b) in [(0, 1), (1, 2), (2, 3), (3, 4), (0, 2), (2, 4)] { mesh.connect(a, b, loss: 0.2) }
        mesh.run(for: 40_000)
        mesh.apply(.sendPublicMessage("lossy"), at: 0)
        mesh.run(for: 5_000)
        for node in 1..<5 { #expect(mesh.publicMessages(at: node).count <= 1) }
        #expect(mesh.framesLost > 0)
    }
}

@Suite("MeshNode over the in-process air")
struct InProcessAirTests {
    @Test(.timeLimit(.minutes(3)))  // a backstop above loaded full-suite runs (see VirtualRadioTests)
    func threeNodesOnOneSegment() async throws {
        let air = InProcessAir(mtu: 185)
        let clock: @Sendable () -> UInt64 = { start }
        let nodes = (0..<3).map { index in
            MeshNode(engine: MeshPeerEngine(identity: makeIdentity("n\(index)")), transport: air.join(), wallClock: clock, seed: UInt64(index))
        }
        let text = String(repeating: "a fragmented hello ", count: 40)
        let received = await withTaskGroup(of: [String].self) { group in
            for node in nodes { group.addTask { await node.run(); return [] } }
            for listener in nodes.dropFirst() {
                group.addTask {
                    for await action in listener.actions {
                        if case .publicMessage(let message) = action { return [message.text] }
                    }
                    return []
                }
            }
            group.addTask {
                // Wait until the speaker knows both listeners (so both know the speaker, via announce-back).
                for await action in nodes[0].actions {
                    if case .peerVerified = action, await nodes[0].peers.count == 2 { break }
                }
                await nodes[0].submit(.sendPublicMessage(text))
                return []
            }
            var all: [String] = []
            var finishedListeners = 0
            for await messages in group where !messages.isEmpty {
                all += messages
                finishedListeners += 1
                if finishedListeners == 2 { break }
            }
            group.cancelAll()
            return all
        }
        #expect(received == [text, text])
        #expect(air.stats.droppedOverMTU == 0)
    }
}
